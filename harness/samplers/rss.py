"""RSS (every ``interval_s``) and USS (every ``uss_interval_s``) of the worker.

RSS is one read of /proc/<pid>/statm: cheap enough for 10 Hz. USS needs
/proc/<pid>/smaps(_rollup), which costs milliseconds on a torch-sized process,
so it is read at a lower rate and written as null in between. In the worker the
sampler runs on a daemon thread so a long step (or a long gen-2 pause) still
gets sampled; tests drive it from ``poll`` with a fake clock instead.
"""

from __future__ import annotations

import threading

import psutil

from harness.samplers.base import Clock, Every, Sink


class RssSampler:
    name = "rss"

    def __init__(
        self, interval_s: float = 0.1, uss_interval_s: float = 1.0, background: bool = True
    ) -> None:
        self._process = psutil.Process()
        self._every = Every(interval_s)
        self._uss_every = Every(uss_interval_s)
        self._background = background
        self._uss_ok = True
        self._ops = 0
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._sink: Sink | None = None
        self._clock: Clock | None = None
        self._lock = threading.Lock()  # the thread and stop() both take samples

    def unavailable(self) -> str | None:
        try:
            self._process.memory_info()
        except (psutil.Error, OSError) as exc:
            return f"psutil cannot read this process's memory: {exc}"
        return None

    def start(self, writer: Sink, clock: Clock) -> None:
        self._sink, self._clock = writer, clock
        self._take(clock())
        self._every.next_at = clock() + self._every.interval_s
        if self._background:
            self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
            self._thread.start()

    def poll(self, now: float, ops: int) -> None:
        self._ops = ops  # an int store: safe to read from the sampler thread
        if not self._background and self._every.due(now):
            self._take(now)

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._clock is not None:
            self._take(self._clock())

    def _loop(self) -> None:
        assert self._clock is not None
        while not self._halt.wait(self._every.interval_s):
            self._take(self._clock())

    def _take(self, now: float) -> None:
        with self._lock:
            rss = self._process.memory_info().rss
            uss = self._uss() if self._uss_every.due(now) else None
            assert self._sink is not None
            self._sink.sample("rss", now, rss=rss, uss=uss, ops=self._ops)

    def _uss(self) -> int | None:
        if not self._uss_ok:
            return None
        try:
            return int(self._process.memory_full_info().uss)
        except (psutil.Error, OSError, AttributeError):
            self._uss_ok = False  # not permitted or not supported: stop asking
            return None
