"""A native allocation window: memray with native stacks, once per run, when installed.

tracemalloc sees Python's allocators only; tensor data, numpy buffers and a C
extension's ``malloc`` reach the C heap without it, and the analysis can then
only say "native memory grows". With the optional ``[native]`` extra
(memray), one short window records every ``malloc`` with its hybrid stack
(native frames and the Python frames around them; the workload runs several
times slower meanwhile), and what is still allocated when it closes is
grouped by site: the native allocator function and the innermost Python
frame outside the standard library that led to it, written as one
``native`` line (``NativeLine`` in :mod:`harness.runfiles.records`)::

    {"type": "native", "t": 17.2, "from_t": 15.2, "ops": 4210,
     "sites": [{"native": "c10::alloc_cpu", "python": "refcache/radix.py:125 (insert)",
                "bytes": 1638400, "count": 200}], "seconds": 0.4}

Like the allocation windows it is bracketed by ``attribution`` events
(window ``NATIVE_WINDOW``), so its slowed samples judge nothing. memray does
not see ``malloc`` called through a pointer from ``dlsym`` (ctypes), so a
native leak of that kind still shows only as heap growth no site explains.
Without memray the sampler is unavailable with a one-line hint.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from harness.runfiles.records import NativeLine, NativeSite
from harness.worker.frames import HARNESS_DIR, is_library, short
from harness.worker.samplers.base import BaseSampler, Clock, Sink

NATIVE_WINDOW = 0  # the allocation windows are numbered from 1
TOP_SITES = 8
INSTALL_HINT = "memray is not installed: pip install 'leak-harness[native]' names native sites"
Frame = tuple[str, str, int]  # function, file, line, as memray gives them


class NativeSampler(BaseSampler):
    name = "native"

    def __init__(self, start_s: float, length_s: float, read_aside: bool = False) -> None:
        """``read_aside``: read the capture on a thread of its own (seconds on a busy heap)
        while the other samplers go on; the worker's loop reads it itself and stalls."""
        super().__init__()
        self._start_s, self._length_s = start_s, length_s
        self._read_aside = read_aside
        self._reader: threading.Thread | None = None
        self._tracker: Any = None
        self._path = ""
        self._began = (0.0, 0)
        self._done = False

    def unavailable(self) -> str | None:
        return None if importlib.util.find_spec("memray") is not None else INSTALL_HINT

    def start(self, writer: Sink, clock: Clock) -> None:
        # Imported now, before the owner search counts its baseline: memray's
        # import makes a thousand types that would otherwise count as grown.
        import memray  # noqa: F401

        super().start(writer, clock)

    def poll(self, now: float, ops: int) -> None:
        self.ops = ops
        if self._tracker is None and not self._done and now >= self._start_s:
            self._begin(now)
        elif self._tracker is not None and now >= self._began[0] + self._length_s:
            self._finish(now)

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.join()
        if self._tracker is not None:  # cut short by the end of the run: nothing to read
            self._close_tracker()
            self.sink.event("attribution", self.now(), phase="end", window=NATIVE_WINDOW,
                            complete=False)
            os.unlink(self._path)

    def _begin(self, now: float) -> None:
        import memray

        handle, self._path = tempfile.mkstemp(prefix="leak-harness-native-", suffix=".bin")
        os.close(handle)
        os.unlink(self._path)  # memray creates it and refuses to overwrite
        self.sink.event("attribution", now, phase="start", window=NATIVE_WINDOW)
        self._tracker = memray.Tracker(self._path, native_traces=True)
        self._tracker.__enter__()
        self._began = (now, self.ops)

    def _close_tracker(self) -> None:
        self._tracker.__exit__(None, None, None)
        self._tracker, self._done = None, True

    def _finish(self, now: float) -> None:
        self._close_tracker()
        if self._read_aside:
            self._reader = threading.Thread(target=self._read, args=(now,),
                                            name="leak-harness-native-reader", daemon=True)
            self._reader.start()
        else:
            self._read(now)

    def _read(self, now: float) -> None:
        began = time.perf_counter()
        error: str | None = None
        try:
            sites = read_sites(self._path)
        except Exception as exc:  # the window must still end, or it would hide the run's rest
            sites, error = [], f"{type(exc).__name__}: {exc}"
        finally:
            os.unlink(self._path)
        # The window ends once its capture is read: seconds on a busy heap, with the
        # workload stalled (or, read aside, slowed), and memray's symbol tables left
        # in RSS; none of that judges anything, and the level it leaves is bridged.
        self.sink.event("attribution", self.now(), phase="end", window=NATIVE_WINDOW,
                        complete=True)
        line: NativeLine = {
            "type": "native", "t": now, "from_t": round(self._began[0], 4),
            "ops": self.ops - self._began[1], "sites": sites,
            "seconds": round(time.perf_counter() - began, 3),
        }
        if error is not None:
            line["error"] = error
        self.sink.line(line)


def read_sites(path: str) -> list[NativeSite]:
    """What the capture still held at its end, grouped by native function and Python caller."""
    import memray

    records = memray.FileReader(path).get_leaked_allocation_records(merge_threads=True)
    grouped: dict[tuple[str, str], NativeSite] = {}
    for record in records:
        stack: list[Frame] = list(record.hybrid_stack_trace())
        python = python_caller(stack)
        if python is None:
            continue  # the harness's own allocations (its samplers, the sample writer)
        native = native_function(stack)
        entry = grouped.setdefault((native, python), {
            "native": native, "python": python, "bytes": 0, "count": 0})
        entry["bytes"] += int(record.size)
        entry["count"] += int(record.n_allocations)
    return sorted(grouped.values(), key=lambda e: -e["bytes"])[:TOP_SITES]


def native_function(stack: Sequence[Frame]) -> str:
    """The innermost native frame's function, C++ arguments left out ("?" when unknown)."""
    for function, filename, _ in stack:
        if not filename.endswith(".py"):
            return function.split("(", 1)[0] or "?"
    return "?"


def python_caller(stack: Iterable[Frame]) -> str | None:
    """``file:line (function)`` of the innermost Python frame outside the standard library.

    None when that frame is the harness's own; a stack with no Python frame
    outside the library (a native thread) is named by its innermost Python frame.
    """
    frames = [f for f in stack if f[1].endswith(".py")]
    if not frames:
        return "no Python frame (a native thread)"
    owner = next((f for f in frames if not is_library(f[1])), frames[0])
    if os.path.abspath(owner[1]).startswith(HARNESS_DIR):
        return None
    return f"{short(owner[1])}:{owner[2]} ({owner[0]})"
