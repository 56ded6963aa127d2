"""The recorder: the worker's samplers inside someone else's program.

One per recorded process, started by :mod:`harness.record.bootstrap` before
the program's own code runs. A background thread polls the samplers every
``POLL_S`` (the program has no loop of ours to poll from) and streams the
same lines a worker writes to ``samples.jsonl`` in the process's folder, so
the same analysis, verdicts and reports apply; on a Python whose
``tracemalloc.stop()`` can crash another thread (CPython < 3.12.9), the
allocation windows' tracemalloc calls run on the program's main thread
(:mod:`harness.record.windows`). ``stop`` ends the recording:
``loop_end``, then the final windows (garbage, owner search, trim probe) and
``end``, as a worker does. ``leak-harness record`` asks for that before it
stops the program (a stop notice in the recording's folder), so the program's
teardown is not recorded; a process killed before that leaves every sample
taken so far, and its analysis says it was cut short.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator, Mapping
from pathlib import Path

from harness.config import RunConfig
from harness.record import HOOKS, Reading
from harness.record.mainthread import MainThread
from harness.record.windows import MainThreadWindows
from harness.runfiles.names import SAMPLES_FILE, STOP_FILE
from harness.runfiles.records import GaugesLine
from harness.runfiles.samples import SampleWriter, header
from harness.worker.glibc import fill_thread_cache
from harness.worker.samplers import (
    Sampler,
    allocation_windows,
    build_samplers,
    native_window,
    start_available,
)
from harness.worker.samplers.allocations import AllocationSampler, stop_races_other_threads
from harness.worker.samplers.gauges import GaugesSampler
from harness.worker.samplers.native import NativeSampler

POLL_S = 0.1  # the samplers keep their own intervals; this is how often they are asked
JOIN_S = 5.0  # at most this long for the polling thread to finish its round
FINISH_S = 30.0  # at most this long for another thread's stop() to write the end
# memray's capture of a busy program takes seconds per second to read (and the
# window is excluded from every judged rate): a short one names the sites as well.
NATIVE_S = 0.5


class LiveGauges(GaugesSampler):
    """The program's gauges, picked up as it registers them (``harness.record.gauge``)."""

    def __init__(self, source: Mapping[str, Reading], interval_s: float) -> None:
        super().__init__({}, interval_s)
        self._source = source
        self._dropped: set[str] = set()

    def unavailable(self) -> str | None:
        return None  # the program registers its gauges after the recorder starts

    def take(self, now: float, final: bool = False) -> None:
        for name, reading in list(self._source.items()):
            if name not in self._gauges and name not in self._dropped:
                self._gauges[name] = reading
        super().take(now, final)

    def _drop(self, name: str, now: float, why: str) -> None:
        self._dropped.add(name)
        super()._drop(name, now, why)


@contextlib.contextmanager
def sigterm_deferred() -> Iterator[None]:
    """SIGTERM waits until the final windows are written (seconds), then takes effect.

    A launcher often terminates its workers right after Ctrl-C reached them all:
    the SIGTERM must not cut the recording short; SIGKILL still ends it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        # The recording ends as the process does: a SIGTERM that asked for that exit has
        # its way already; one the program handles itself is handed on.
        if received and callable(previous) and not getattr(previous, "ends_recording", False):
            signal.raise_signal(signal.SIGTERM)


class Recorder:
    def __init__(self, folder: Path, config: RunConfig) -> None:
        self.folder, self.config = folder, config
        # ``leak-harness record`` touches this in the recording's folder just before
        # it signals the program to stop.
        self.stop_notice = folder.parent / STOP_FILE
        self.t0 = time.monotonic()
        self.writer = SampleWriter(folder / SAMPLES_FILE)
        self.samplers: list[Sampler] = []
        self.abandoned = False  # a forked child's copy of its parent's recorder
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._ended = threading.Event()

    def clock(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        gc_info = {"mode": "program", "enabled": gc.isenabled(),
                   "thresholds": list(gc.get_threshold())}
        self.writer.write(header(self.config.to_dict(), gc_info))
        self.writer.event("start", 0.0, pid=os.getpid(), ppid=os.getppid(),
                          argv=list(getattr(sys, "orig_argv", sys.argv)))
        self.samplers = start_available(self._samplers(), self.writer, self.clock)
        HOOKS.on_idle = self._idle_reading
        HOOKS.on_ready = lambda: self.writer.event("ready", self.clock(), ops=HOOKS.ops)
        self._thread = threading.Thread(target=self._poll, name="leak-harness-recorder",
                                        daemon=True)
        self._thread.start()
        self._name_own_threads()

    def _name_own_threads(self) -> None:
        """Tell the windows which threads are the recorder's: before the program's code
        runs, every thread but this one is."""
        ours = {t.ident for t in threading.enumerate() if t.ident is not None}
        for sampler in self.samplers:
            if isinstance(sampler, MainThreadWindows):
                sampler.ours = ours - {threading.get_ident()}

    def _samplers(self) -> list[Sampler]:
        """The worker's samplers; gauges follow the program's registrations and the
        native window's capture is read aside, as the program must go on."""
        every = self.config.intervals.gauges_s
        made = []
        for sampler in build_samplers(self.config, {}):
            if isinstance(sampler, GaugesSampler):
                sampler = LiveGauges(HOOKS.gauges, every)
            elif isinstance(sampler, AllocationSampler) and stop_races_other_threads():
                main = MainThread()
                sampler = MainThreadWindows(*allocation_windows(self.config), main, main.install())
            elif isinstance(sampler, NativeSampler):
                start, length = native_window(self.config)
                sampler = NativeSampler(start, min(length, NATIVE_S), read_aside=True)
            made.append(sampler)
        return made

    def _poll(self) -> None:
        fill_thread_cache()  # before the first sample: see its docstring
        warm = self.config.warmup_s <= 0
        if warm:
            self.writer.event("warmup_end", 0.0, ops=HOOKS.ops)
        while not self._halt.wait(POLL_S):
            now = self.clock()
            if not warm and now >= self.config.warmup_s:
                warm = True
                self.writer.event("warmup_end", now, ops=HOOKS.ops)
            if self.stop_notice.exists():
                # The program is about to be stopped: the recording ends now, while
                # the program still holds what it held. Its teardown frees its state
                # (seen: 2 MB of C heap within 0.1 s) and leaves it as cyclic
                # garbage (the whole tree), which no final window should count.
                self.stop("stop notice")
                return
            for sampler in list(self.samplers):
                try:
                    sampler.poll(now, HOOKS.ops)
                except Exception as exc:  # one sampler's failure must not end the others
                    self.samplers.remove(sampler)
                    self.writer.event("sampler_failed", self.clock(), sampler=sampler.name,
                                      error=f"{type(exc).__name__}: {exc}")

    def _idle_reading(self, values: dict[str, float]) -> None:
        if values:
            line: GaugesLine = {"type": "gauges", "t": self.clock(), "values": values,
                                "ops": HOOKS.ops}
            self.writer.line(line)

    def abandon(self) -> None:
        """In a forked child: this is the parent's recording; unhook it, write nothing."""
        self.abandoned = True
        self._halt.set()  # no thread survives a fork; in this process, stop polling too
        self.writer.disown()
        for callback in list(gc.callbacks):
            if getattr(callback, "__self__", None) in self.samplers:
                gc.callbacks.remove(callback)
        if tracemalloc.is_tracing():
            tracemalloc.stop()  # an allocation window was open at the fork

    def stop(self, reason: str) -> None:
        """End the recording once: the final windows, then ``end``. Never raises.

        A second call (the program's exit while the stop notice's call is still
        writing) waits, up to FINISH_S, for the first to end.
        """
        with self._stop_lock:
            first = not (self._stopped or self.abandoned)
            self._stopped = True
        if not first:
            if not self.abandoned:
                self._ended.wait(FINISH_S)
            return
        try:
            with sigterm_deferred():
                self._finish(reason)
        finally:
            self._ended.set()

    def _finish(self, reason: str) -> None:
        self._halt.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)
        HOOKS.on_idle = HOOKS.on_ready = None
        if HOOKS.scenario:
            self.writer.event("scenario", self.clock(), scenario=HOOKS.scenario)
        self.writer.event("loop_end", self.clock(), ops=HOOKS.ops, reason=reason)
        for sampler in self.samplers:
            try:
                sampler.stop()
            except Exception as exc:  # the program is ending: record why, lose nothing else
                self.writer.event("sampler_failed", self.clock(), sampler=sampler.name,
                                  error=f"{type(exc).__name__}: {exc}")
        self.writer.event("end", self.clock(), ops=HOOKS.ops, reason=reason)
        self.writer.close()
