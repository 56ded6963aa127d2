"""glibc through ctypes: the functions the heap, garbage and malloc_trim samplers call.

Loaded by soname, never found with ``ctypes.util.find_library`` (see
:func:`glibc_function`); off glibc every loader returns None and the reason,
so a sampler can say why a signal is missing instead of failing.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from collections.abc import Callable
from typing import Any

HeapReader = Callable[[], int]
GLIBC_SONAME = "libc.so.6"  # every glibc port this runs on (x86-64, aarch64, ppc64le, s390x)
# glibc's per-thread cache: TCACHE_COUNT chunks per bin (its default), 64 bins
# of chunk sizes 32 to 1040 bytes, which requests of 24 + 16 i bytes land in.
TCACHE_COUNT = 7
TCACHE_SIZES = tuple(24 + 16 * i for i in range(64))


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc >= 2.33): every field a ``size_t``."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost",
    )]


@functools.cache
def _glibc() -> ctypes.CDLL:
    return ctypes.CDLL(GLIBC_SONAME)


def glibc_function(symbol: str) -> tuple[Any, str | None]:
    """``symbol`` from glibc, or None and why not (another libc, an older glibc).

    By its soname, never through ``ctypes.util.find_library``: that runs
    ``ldconfig -p`` in a subprocess and reads its pipes to the end, and a child
    the program forks meanwhile (multiprocessing's fork does not exec) keeps
    their write ends open: the recorder's polling thread, loading glibc as a
    recorded program forks its worker, would block until that worker exits.
    """
    if platform.libc_ver()[0] != "glibc":
        return None, f"{symbol} needs glibc; this process does not use it"
    try:
        return _glibc()[symbol], None  # a new function object: callers set its types
    except (OSError, AttributeError) as exc:
        return None, f"glibc's {symbol} could not be loaded: {exc}"


def load_heap_reader() -> tuple[HeapReader | None, str | None]:
    """A function returning malloc's bytes in use, or None and the reason why not."""
    mallinfo2, why = glibc_function("mallinfo2")
    if mallinfo2 is None:
        return None, f"the C heap signal is unavailable: {why}"
    mallinfo2.argtypes = []
    mallinfo2.restype = MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)

    return in_use, None


def fill_thread_cache() -> None:
    """Fill this thread's glibc tcache now, so that it cannot fill during the run.

    malloc keeps up to TCACHE_COUNT freed chunks of each small size per thread
    and ``mallinfo2`` counts them as in use. A sampler thread that frees the
    program's objects (a census holding the last reference) fills its cache by
    about 110 KB over its first seconds, a climb of the harness's own making in
    the heap signal. Filled at once, before the first sample, it is part of the
    baseline instead. No-op off glibc.
    """
    malloc, _ = glibc_function("malloc")
    free, _ = glibc_function("free")
    if malloc is None or free is None:
        return
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    chunks = [malloc(size) for size in TCACHE_SIZES for _ in range(TCACHE_COUNT)]
    for chunk in chunks:
        free(chunk)
