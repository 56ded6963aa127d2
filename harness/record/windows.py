"""Allocation windows in a recorded program on a Python whose tracemalloc can crash it.

Before CPython 3.12.9 and 3.13.2, ``tracemalloc.stop()`` crashes any thread that
waits for the GIL inside tracemalloc's raw-allocator hook
(:func:`harness.worker.samplers.allocations.stop_races_other_threads`): seen, 2
of 24 recordings died of SIGSEGV in ``os.getcwd`` on the program's main thread
while the recorder's thread stopped a window. So here every tracemalloc call of
a window (start, snapshots, stop) runs on the main thread
(:class:`harness.record.mainthread.MainThread`), while the recorder's thread
waits on an event; a window starts only while no other thread of the program
runs Python (one could be in the hook as the window stops), and otherwise is
skipped with its reason, as is a window the main thread did not take in time.
"""

from __future__ import annotations

import collections
import functools
import sys
import threading
from collections.abc import Sequence
from typing import Any

from harness.record.mainthread import TAKEN_S, MainThread
from harness.runfiles.names import WINDOW_SKIPPED_EVENT
from harness.runfiles.records import SampleLine
from harness.worker.samplers.allocations import AllocationSampler
from harness.worker.samplers.base import Clock, Sink


class Held:
    """What a step on the main thread writes, for the recorder's thread to write on:
    the sample writer's lock must never be taken in a signal handler (the main thread
    may hold it already, writing an idle reading)."""

    def __init__(self) -> None:
        self._calls: collections.deque[tuple[str, tuple[Any, ...], dict[str, Any]]] = (
            collections.deque())

    def line(self, record: SampleLine) -> None:
        self._calls.append(("line", (record,), {}))

    def sample(self, kind: str, t: float, **fields: Any) -> None:
        self._calls.append(("sample", (kind, t), fields))

    def event(self, name: str, t: float, **fields: Any) -> None:
        self._calls.append(("event", (name, t), fields))

    def pass_on(self, sink: Sink) -> None:
        while self._calls:
            method, args, fields = self._calls.popleft()
            getattr(sink, method)(*args, **fields)


class MainThreadWindows(AllocationSampler):
    """The allocation windows, each tracemalloc call on the program's main thread."""

    def __init__(self, starts_s: Sequence[float], length_s: float, main: MainThread,
                 why_not: str | None = None) -> None:
        super().__init__(starts_s, length_s)
        self._main = main
        self._why_not = why_not  # the main thread's signal could not be taken
        self._held = Held()
        self._out: Sink | None = None
        # The recorder's own threads (the polling thread, the RSS guard): started before
        # the program's code, they read files and wait, and never allocate without the GIL.
        self.ours: set[int] = set()

    def unavailable(self) -> str | None:
        if self._why_not is not None:
            return ("allocation windows are off: they must run on the program's main thread "
                    f"on Python {python_version()} (python/cpython#128679), and "
                    f"{self._why_not}")
        return super().unavailable()

    def start(self, writer: Sink, clock: Clock) -> None:
        self._out = writer
        super().start(self._held, clock)

    def poll(self, now: float, ops: int) -> None:
        self.ops = ops
        if not self.due(now):
            return
        due = self._pending[0] if self._open is None else None
        why = self._why_skipped() if due is not None else None
        if why is None and not self._main.run(functools.partial(self._step, ops)):
            why = self._why_not_taken()
        # A window not begun is skipped (unless a late step began it after all); an open
        # one is asked for again at the next poll.
        if why is not None and due is not None and self._pending and self._pending[0] is due:
            self._pending.pop(0)
            self.sink.event(WINDOW_SKIPPED_EVENT, now, reason=why)
        self._pass_on()

    def stop(self) -> None:
        if self._open is not None:
            self._main.run(functools.partial(AllocationSampler.stop, self))
        self._pass_on()

    def _step(self, ops: int) -> None:
        """On the main thread: what the worker's windows do in its loop, at this moment."""
        AllocationSampler.poll(self, self.now(), ops)

    def _why_not_taken(self) -> str:
        if not self._main.installed():
            return f"the program took signal {self._main.signum} for itself"
        return (f"the program's main thread did not take it within {TAKEN_S:g} s "
                "(a long call in C code)")

    def _why_skipped(self) -> str | None:
        others = other_threads(self.ours)
        if not others:
            return None
        return (f"the program ran {len(others)} other thread(s) ({', '.join(others[:3])}): "
                f"on Python {python_version()} tracemalloc.stop() can crash one "
                "(python/cpython#128679)")

    def _pass_on(self) -> None:
        if self._out is not None:
            self._held.pass_on(self._out)


def other_threads(ours: set[int]) -> list[str]:
    """The threads with a Python thread state besides the main thread, this one and
    ``ours``."""
    mine = {threading.main_thread().ident, threading.get_ident(), *ours}
    named = {t.ident: t.name for t in threading.enumerate()}
    idents = (set(sys._current_frames()) | set(named)) - mine
    return sorted(named.get(ident) or f"thread {ident}" for ident in idents)


def python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))
