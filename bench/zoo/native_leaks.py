"""Leaks below the Python object layer: torch storages, libc malloc, anonymous mmap.

Each touches what it keeps, so the bytes are resident and RSS can see them,
and books the bytes it asked for (storage bytes, malloc size, mapping
length); allocator headers and the few Python objects holding them are not
counted, which is why these kinds pay in quanta of 16 KiB or more.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
from typing import Any

import torch

from bench.zoo.base import ZooCache
from refcache.keys import RadixKey
from refcache.req import Req

PAGE = mmap.PAGESIZE
FILL = 0xA5


class TensorViews(ZooCache):
    """``insert`` keeps a one-element view of a staging copy of every paid-for value.

    The shape of SGLang #17191: a small view outlives the tensor it was cut
    from and pins that tensor's whole storage. Here the staging copy is the
    inserted KV indices repeated to the debt's size; only ``value[:1]``-sized
    views are kept (``kept_views``), each pinning its copy's storage. The
    ledger counts storage bytes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept_views: list[torch.Tensor] = []

    def insert(
        self, key: RadixKey, value: torch.Tensor, extra: dict[str, Any] | None = None
    ) -> int:
        prefix = super().insert(key, value, extra)
        owed = self.ledger.owed()
        if owed and len(value):
            copies = -(-owed // (value.element_size() * len(value)))  # ceil: at least the debt
            staged = value.repeat(copies)  # written, so resident
            self.kept_views.append(staged[:1])
            self.ledger.add(staged.untyped_storage().nbytes())
        return prefix


class _Libc:
    """libc's malloc, memset and free through ctypes (the buffers a C extension keeps)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        self.malloc = libc.malloc
        self.malloc.argtypes, self.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
        self.free = libc.free
        self.free.argtypes, self.free.restype = [ctypes.c_void_p], None
        self.memset = libc.memset
        self.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        self.memset.restype = ctypes.c_void_p


class NativeMalloc(ZooCache):
    """``extend_request`` mallocs a native scratch buffer for the decode step, never freed.

    As a C extension that forgets its ``free``: the buffers go through
    glibc's malloc (arena chunks, or mmapped ones past the mmap threshold),
    which mallinfo2 counts. They are filled so they are resident. The ledger
    counts the bytes asked of malloc. ``close()`` frees them, so a test
    process that builds many caches does not keep them all.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.libc = _Libc()
        self.buffers: list[int] = []

    def extend_request(
        self, req: Req, tokens: list[int], slots: torch.Tensor | None = None
    ) -> bool:
        owed = self.ledger.owed()
        if owed:
            pointer = self.libc.malloc(owed)
            if pointer is None:
                raise MemoryError(f"malloc({owed}) failed")
            self.libc.memset(pointer, FILL, owed)
            self.buffers.append(pointer)
            self.ledger.add(owed)
        return super().extend_request(req, tokens, slots)

    def close(self) -> None:
        for pointer in self.buffers:
            self.libc.free(pointer)
        self.buffers.clear()
        super().close()


class MmapPages(ZooCache):
    """``evict`` stages the evicted KV into an anonymous mapping that is never unmapped.

    A host tier that copies evictions out and forgets its mappings: the
    pages come from ``mmap`` directly, so neither malloc (mallinfo2) nor
    pymalloc sees them; only RSS (``RssAnon``) does. One byte per page is
    written so every page is resident. The ledger counts mapping lengths,
    whole pages.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mappings: list[mmap.mmap] = []

    def evict(self, num_tokens: int, **per_pool: int) -> int:
        evicted = super().evict(num_tokens, **per_pool)
        owed = self.ledger.owed() // PAGE * PAGE
        if owed:
            mapping = mmap.mmap(-1, owed)
            for offset in range(0, owed, PAGE):
                mapping[offset] = FILL
            self.mappings.append(mapping)
            self.ledger.add(owed)
        return evicted

    def close(self) -> None:
        for mapping in self.mappings:
            mapping.close()
        self.mappings.clear()
        super().close()
