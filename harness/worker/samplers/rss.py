"""RSS (every ``interval_s``) and USS (every ``uss_interval_s``) of the worker.

RSS is one read of /proc/<pid>/statm: cheap enough for 10 Hz. USS needs
/proc/<pid>/smaps(_rollup), a walk of the page tables whose cost grows with the
process (a cache of many GB would take a large share of a core at 1 Hz). So
it is read at a
lower rate, written as null in between, and the rate adapts to its cost: after
each read the next one waits long enough that USS reads take at most
``USS_BUDGET`` (0.2%) of wall time.

Samples are taken from the worker's loop (``poll``), on the thread that holds
the GIL anyway: a thread waking at 10 Hz would make the CPU-bound main thread
hand over the GIL at every wake (torch ops release and retake it), which costs
several percent of ops/s. What a sample still costs is mostly cold caches:
between two samples the workload evicts the code and data of psutil, json and
the file write (``make bench`` measures it).

A guard thread still covers a step that does not return (a long torch call, a
blocking PP receive): it wakes once per ``guard_s`` (a second), and only when
the loop has missed its samples does it sample, at the full rate, until the
loop polls again. Most tests drive the sampler from ``poll`` with a fake clock
and no guard.
"""

from __future__ import annotations

import threading
import time

import psutil

from harness.runfiles.records import RssLine
from harness.worker.samplers.base import Every, PeriodicSampler

USS_BUDGET = 0.002  # the share of wall time USS reads may take (0.2%)


class RssSampler(PeriodicSampler):
    name = "rss"

    def __init__(
        self, interval_s: float = 0.1, uss_interval_s: float = 1.0, guard_s: float | None = 1.0
    ) -> None:
        """``guard_s``: how often the guard thread checks on the loop (None: no guard)."""
        super().__init__(interval_s)
        self._process = psutil.Process()
        self._uss_every = Every(uss_interval_s)
        self._uss_floor_s = uss_interval_s
        self._guard_s = guard_s
        self._uss_ok = True
        self._last_t = 0.0  # when the newest sample was taken, by either thread
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # the loop, the guard and stop() all take samples

    def unavailable(self) -> str | None:
        try:
            self._process.memory_info()
        except (psutil.Error, OSError) as exc:
            return f"psutil cannot read this process's memory: {exc}"
        return None

    def on_start(self, now: float) -> None:
        self.take(now)
        super().on_start(self.now())
        if self._guard_s is not None:
            self._thread = threading.Thread(target=self._watch, name="rss-guard", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        super().stop()

    def _watch(self) -> None:
        """Sample only while the loop is stuck in a step; otherwise sleep a second at a time."""
        assert self._guard_s is not None
        wait = self._guard_s
        while not self._halt.wait(wait):
            now = self.now()
            stalled = now - self._last_t >= 2 * self._every.interval_s
            if stalled:
                self.take(now)
            wait = self._every.interval_s if stalled else self._guard_s

    def take(self, now: float, final: bool = False) -> None:
        with self._lock:
            rss = self._process.memory_info().rss
            uss = self._uss(now) if self._uss_every.due(now) else None
            line: RssLine = {"type": "rss", "t": now, "rss": rss, "uss": uss, "ops": self.ops}
            self.sink.line(line)
            self._last_t = now

    def _uss(self, now: float) -> int | None:
        if not self._uss_ok:
            return None
        began = time.perf_counter()
        try:
            uss = int(self._process.memory_full_info().uss)
        except (psutil.Error, OSError, AttributeError):
            self._uss_ok = False  # not permitted or not supported: stop asking
            return None
        cost = time.perf_counter() - began
        self._uss_every.interval_s = max(self._uss_floor_s, cost / USS_BUDGET)
        self._uss_every.next_at = now + self._uss_every.interval_s
        return uss
