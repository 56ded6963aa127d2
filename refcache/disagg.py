"""The two sides of disaggregated prefill and decode, each a cache with its PD books.

SGLang's PD servers run their usual tree cache (the prefill server a
HiRadixCache when HiCache is on, its storage prefetch started as a request
enters the bootstrap queue; the decode server a RadixCache with
``--disaggregation-decode-enable-radix-cache``) beside the bookkeeping pools of
``refcache.disagg_pools``. The scheduler takes and gives back their rows
(``scenarios.workloads.disagg``); here each side keeps, per request, the row it
holds, so that:

- ``pool_accounting()`` books each pool (``metadata``, and ``req_slots`` on the
  decode side): size, free, held (protected); ``in_transfer`` is the part only
  a transfer in flight holds;
- ``request_tables()`` names the requests holding rows (``metadata_buffers``,
  ``req_slots``): a row kept for a request that has left is a stale entry, the
  signal of an exit path that never gave it back (SGLang #17483).

The PD calls (optional in the protocol, ``scenarios.workloads.protocol``):
``alloc_metadata_buffer(req) -> bool`` / ``free_metadata_buffer(req)`` on both
sides, ``alloc_req_slot(req) -> bool`` / ``free_req_slot(req)`` on the decode side.
The preallocated KV is the cache's own: ``alloc_request`` (match, lock, allocate
the rest) is SGLang's ``_pre_alloc``, ``cache_finished_req(req, is_insert=False)``
its ``release_kv_cache`` on a failed transfer.
"""

from __future__ import annotations

from typing import Any

import torch

from refcache.disagg_pools import MetadataBuffers, MetadataIdxAllocator
from refcache.hiradix import HiRadixCache
from refcache.pools import PoolAccount, SlotAllocator
from refcache.radix import RadixCache
from refcache.req import Req

PREFILL, DECODE = "prefill", "decode"
METADATA_TABLE, REQ_SLOT_TABLE = "metadata_buffers", "req_slots"


class DisaggBooks:
    """The PD pools of one side and the rows each request holds in them."""

    side: str = PREFILL

    def _init_books(self, metadata_size: int, req_slots: int = 0) -> None:
        self.metadata = MetadataIdxAllocator(metadata_size)
        self.metadata_buffers = MetadataBuffers(metadata_size)
        self.metadata_held: dict[int, int] = {}  # rid -> row (SGLang: req.metadata_buffer_index)
        self.req_slots = SlotAllocator(req_slots, "req_slots") if req_slots else None
        self.req_slot_held: dict[int, torch.Tensor] = {}  # rid -> row (req.req_pool_idx)

    # ------------------------------------------------------------------ PD calls
    def alloc_metadata_buffer(self, req: Req) -> bool:
        """A metadata row for the request (False: none free, the request waits)."""
        if req.rid in self.metadata_held:
            return True
        index = self.metadata.alloc()
        if index is None:
            return False
        self.metadata_held[req.rid] = index
        self.metadata_buffers.write(index, req.token_ids[-1] if req.token_ids else 0, req.rid)
        return True

    def free_metadata_buffer(self, req: Req) -> None:
        """Give the row back, if the request holds one (``release_req_to_metadata_buffer``)."""
        index = self.metadata_held.pop(req.rid, None)
        if index is not None:
            self.metadata_buffers.clear(index)
            self.metadata.free(index)

    def alloc_req_slot(self, req: Req) -> bool:
        """Decode side: a request row for a preallocated request (False: none free)."""
        if self.req_slots is None or req.rid in self.req_slot_held:
            return self.req_slots is not None
        row = self.req_slots.alloc(1)
        if row is None:
            return False
        self.req_slot_held[req.rid] = row
        return True

    def free_req_slot(self, req: Req) -> None:
        row = self.req_slot_held.pop(req.rid, None)
        if row is not None and self.req_slots is not None:
            self.req_slots.free(row)

    # ------------------------------------------------------------------ books
    def _pd_books(self) -> dict[str, PoolAccount]:
        """The decode side's rows are held only by transfers in flight (taken right before
        ``send_metadata``, given back when the transfer ends), so all its metadata rows are
        in transfer; the prefill side's row is held from bootstrap on, by a waiting request."""
        held = len(self.metadata_held)
        moving = held if self.side == DECODE else 0
        books = {"metadata": PoolAccount(self.metadata.size, self.metadata.available_size(),
                                         0, held, moving)}
        if self.req_slots is not None:
            rows = len(self.req_slot_held)
            transfers = sum(1 for rid in self.req_slot_held if rid in self.metadata_held)
            books["req_slots"] = PoolAccount(self.req_slots.size,
                                             self.req_slots.available_size(), 0, rows, transfers)
        return books

    def _pd_tables(self) -> dict[str, list[int]]:
        tables = {METADATA_TABLE: list(self.metadata_held)}
        if self.req_slots is not None:
            tables[REQ_SLOT_TABLE] = list(self.req_slot_held)
        return tables

    def _pd_stats(self) -> dict[str, float]:
        stats: dict[str, float] = {"metadata_held": len(self.metadata_held),
                                   "metadata_free": self.metadata.available_size()}
        if self.req_slots is not None:
            stats["req_slots_held"] = len(self.req_slot_held)
        return stats

    def _check_books(self) -> None:
        """With nothing in any PD queue every row is free again."""
        assert not self.metadata_held, f"metadata rows still held: {sorted(self.metadata_held)}"
        assert self.metadata.available_size() == self.metadata.size, "metadata rows lost"
        if self.req_slots is not None:
            assert not self.req_slot_held, f"request rows still held: {sorted(self.req_slot_held)}"
            assert self.req_slots.available_size() == self.req_slots.size, "request rows lost"


class PrefillCache(DisaggBooks, HiRadixCache):
    """The prefill server's HiRadixCache (storage prefetch) with its metadata rows."""

    side = PREFILL

    def __init__(self, *args: Any, metadata_size: int = 64, **kwargs: Any) -> None:
        HiRadixCache.__init__(self, *args, **kwargs)
        self._init_books(metadata_size)

    def pool_accounting(self) -> dict[str, PoolAccount]:
        return {**super().pool_accounting(), **self._pd_books()}

    def request_tables(self) -> dict[str, list[int]]:
        return {**super().request_tables(), **self._pd_tables()}

    def request_table_pools(self) -> dict[str, str]:
        return {**super().request_table_pools(), METADATA_TABLE: "metadata"}

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._pd_stats()}

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        super().sanity_check(outstanding_kv, outstanding_states)
        self._check_books()


class DecodeCache(DisaggBooks, RadixCache):
    """The decode server's RadixCache with its metadata rows and request rows."""

    side = DECODE

    def __init__(self, *args: Any, metadata_size: int = 64, req_slots: int = 48,
                 **kwargs: Any) -> None:
        RadixCache.__init__(self, *args, **kwargs)
        self._init_books(metadata_size, req_slots)

    def pool_accounting(self) -> dict[str, PoolAccount]:
        return {**super().pool_accounting(), **self._pd_books()}

    def request_tables(self) -> dict[str, list[int]]:
        return self._pd_tables()

    def request_table_pools(self) -> dict[str, str]:
        return {METADATA_TABLE: "metadata", REQ_SLOT_TABLE: "req_slots"}

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._pd_stats()}

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        super().sanity_check(outstanding_kv, outstanding_states)
        self._check_books()
