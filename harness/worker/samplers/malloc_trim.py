"""glibc ``malloc_trim`` probe at the end of a run: RSS before and after.

Freed memory that glibc keeps in its arenas still counts in RSS. If trimming
gives most of the growth back, the growth was allocator retention, not live
objects; if RSS stays up, something still holds the memory.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable

import psutil

from harness.worker.glibc import glibc_function
from harness.worker.samplers.base import BaseSampler, forced_collection


def _load_trim() -> tuple[Callable[[int], int] | None, str | None]:
    trim, why = glibc_function("malloc_trim")
    if trim is None:
        return None, why
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim, None


class MallocTrimSampler(BaseSampler):
    """Not periodic: the probe runs once, at stop, after every other reading."""

    name = "malloc_trim"

    def __init__(self) -> None:
        super().__init__()
        self._trim, self._why_not = _load_trim()
        self._process = psutil.Process()

    def unavailable(self) -> str | None:
        return self._why_not

    def stop(self) -> None:
        if self._trim is None or not self.started:
            return
        # The incident's diagnosis in three numbers: RSS as it is, after a forced
        # full collection (cyclic garbage), after trimming (allocator retention).
        untouched = self._process.memory_info().rss
        with forced_collection():
            gc.collect()
        before = self._process.memory_info().rss
        returned = self._trim(0)
        after = self._process.memory_info().rss
        self.sink.event(
            "malloc_trim", self.now(), rss_before_collect=untouched, rss_before=before,
            rss_after=after, released=before - after, trimmed=bool(returned), ops=self.ops,
        )
