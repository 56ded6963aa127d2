"""The small bookkeeping pools of disaggregated prefill and decode (SGLang's PD).

A prefill engine hands a request's KV to a decode engine. Besides its KV pool
each side keeps:

- metadata buffers (SGLang's ``MetadataBuffers``, indexed through
  ``ReqToMetadataIdxAllocator``): one row per request between bootstrap (prefill:
  ``pop_bootstrapped``) or preallocation (decode: ``pop_preallocated``) and the
  end of its transfer, where the prefill side writes the first output token and
  the bootstrap room and the decode side reads them;
- on the decode side, request slots (``DecodeReqToTokenPool``: rows for the
  running requests plus the preallocated ones, ``pre_alloc_size`` more).

Indices go out in deque order and come back with ``free``; a double free or a
foreign index raises :class:`PoolError` (SGLang's allocator appends whatever it is
given; its #17259 race freed an index twice).
"""

from __future__ import annotations

from collections import deque

import torch

from refcache.pools import PoolError

# Columns of a metadata row: SGLang pads each buffer past 64 bytes for RDMA.
OUTPUT_ID_COLS = 16
ROOM_COLS = 8


class MetadataIdxAllocator:
    """SGLang's ``ReqToMetadataIdxAllocator``: a deque of free row indices."""

    def __init__(self, size: int, name: str = "metadata") -> None:
        if size <= 0:
            raise ValueError(f"{name} pool size must be positive, got {size}")
        self.size, self.name = size, name
        self.free_slots: deque[int] = deque(range(size))
        self._in_use = [False] * size

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self) -> int | None:
        if not self.free_slots:
            return None
        index = self.free_slots.popleft()
        self._in_use[index] = True
        return index

    def free(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise PoolError(f"{self.name}: foreign index {index} freed "
                            f"(outside 0..{self.size - 1})")
        if not self._in_use[index]:
            raise PoolError(f"{self.name}: double free of index {index}")
        self._in_use[index] = False
        self.free_slots.append(index)


class MetadataBuffers:
    """The rows a transfer's metadata lands in: first output token, bootstrap room."""

    def __init__(self, size: int) -> None:
        self.output_ids = torch.zeros((size, OUTPUT_ID_COLS), dtype=torch.int32)
        self.bootstrap_room = torch.zeros((size, ROOM_COLS), dtype=torch.int64)

    def write(self, index: int, first_token: int, room: int) -> None:
        """The prefill side's ``set_buf``: what the decode side reads at transfer end."""
        self.output_ids[index, 0] = first_token
        self.bootstrap_room[index, 0] = room

    def clear(self, index: int) -> None:
        """Zero a freed row, so a stale room never reads as written (SGLang #27374)."""
        self.output_ids[index].zero_()
        self.bootstrap_room[index].zero_()
