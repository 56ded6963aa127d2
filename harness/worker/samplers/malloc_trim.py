"""glibc ``malloc_trim`` probe at the end of a run: RSS before and after.

Freed memory that glibc keeps in its arenas still counts in RSS. If trimming
gives most of the growth back, the growth was allocator retention, not live
objects; if RSS stays up, something still holds the memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import platform
from collections.abc import Callable

import psutil

from harness.worker.samplers.base import Clock, Sink, forced_collection


def _load_trim() -> tuple[Callable[[int], int] | None, str | None]:
    if platform.libc_ver()[0] != "glibc":
        return None, "malloc_trim needs glibc; this process does not use it"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError) as exc:
        return None, f"glibc's malloc_trim could not be loaded: {exc}"
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim, None


class MallocTrimSampler:
    name = "malloc_trim"

    def __init__(self) -> None:
        self._trim, self._why_not = _load_trim()
        self._process = psutil.Process()
        self._sink: Sink | None = None
        self._clock: Clock | None = None
        self._ops = 0

    def unavailable(self) -> str | None:
        return self._why_not

    def start(self, writer: Sink, clock: Clock) -> None:
        self._sink, self._clock = writer, clock

    def poll(self, now: float, ops: int) -> None:
        self._ops = ops  # the probe itself runs once, at stop()

    def stop(self) -> None:
        if self._trim is None or self._clock is None or self._sink is None:
            return
        # The incident's diagnosis in three numbers: RSS as it is, after a forced
        # full collection (cyclic garbage), after trimming (allocator retention).
        untouched = self._process.memory_info().rss
        with forced_collection():
            gc.collect()
        before = self._process.memory_info().rss
        returned = self._trim(0)
        after = self._process.memory_info().rss
        self._sink.event(
            "malloc_trim", self._clock(), rss_before_collect=untouched, rss_before=before,
            rss_after=after, released=before - after, trimmed=bool(returned), ops=self._ops,
        )
