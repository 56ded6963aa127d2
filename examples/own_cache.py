"""An example of pointing leak-harness at your own cache.

``BlockHashCache`` is a prefix cache with a deliberately different layout from
``refcache``: no radix tree, no intrusive lists. KV is cut into fixed blocks;
each block is found by the hash of (parent block hash, its tokens) in a dict,
LRU order is an ``OrderedDict`` of unreferenced leaf blocks (vLLM's style).
It implements the cache protocol of ``scenarios/workloads/protocol.py``, so every
scenario runs on it unchanged::

    leak-harness run radix-steady --target examples.own_cache:make

The factory takes the scenario's options it understands and ignores the rest.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from refcache.pools import PoolAccount, SlotAllocator
from refcache.req import Req


@dataclass(eq=False)
class Block:
    hash: int
    parent: Block | None
    slots: torch.Tensor
    refs: int = 0
    children: int = 0


@dataclass
class Match:
    device_indices: torch.Tensor
    last_device_node: tuple[Block, ...]
    last_host_node: tuple[Block, ...] = ()
    host_hit_length: int = 0


@dataclass
class BlockHashCache:
    pool: SlotAllocator
    block: int = 16
    blocks: dict[int, Block] = field(default_factory=dict)
    free_lru: OrderedDict[int, Block] = field(default_factory=OrderedDict)

    # -- lookup
    def _chain(self, tokens: Sequence[int]) -> list[tuple[int, int]]:
        """(hash, start) of every whole block of tokens."""
        out, parent = [], 0
        for start in range(0, len(tokens) - len(tokens) % self.block, self.block):
            parent = hash((parent, tuple(tokens[start : start + self.block])))
            out.append((parent, start))
        return out

    def match_prefix(self, key: Any) -> Match:
        found: list[Block] = []
        for h, _ in self._chain(key.token_ids):
            blk = self.blocks.get(h)
            if blk is None:
                break
            found.append(blk)
            if h in self.free_lru:
                self.free_lru.move_to_end(h)
        slots = torch.cat([b.slots for b in found]) if found else torch.empty(0, dtype=torch.int64)
        return Match(slots, tuple(found))

    def insert(self, key: Any, value: torch.Tensor, extra: dict[str, Any] | None = None) -> int:
        prefix, parent = 0, None
        for h, start in self._chain(key.token_ids):
            blk = self.blocks.get(h)
            if blk is None:
                blk = Block(h, parent, value[start : start + self.block].clone())
                self.blocks[h] = blk
                self._set_leaf(blk)
                if parent is not None:
                    parent.children += 1
                    self.free_lru.pop(parent.hash, None)
            else:
                prefix = start + self.block
            parent = blk
        return prefix

    def _set_leaf(self, blk: Block) -> None:
        if blk.refs == 0 and blk.children == 0:
            self.free_lru[blk.hash] = blk

    # -- eviction and locks
    def evict(self, num_tokens: int, **per_pool: int) -> int:
        freed = 0
        while freed < num_tokens and self.free_lru:
            _, blk = self.free_lru.popitem(last=False)
            del self.blocks[blk.hash]
            self.pool.free(blk.slots)
            freed += len(blk.slots)
            if blk.parent is not None:
                blk.parent.children -= 1
                self._set_leaf(blk.parent)
        return freed

    def inc_lock_ref(self, handle: tuple[Block, ...]) -> None:
        for blk in handle:
            blk.refs += 1
            self.free_lru.pop(blk.hash, None)

    def dec_lock_ref(self, handle: tuple[Block, ...]) -> None:
        for blk in handle:
            blk.refs -= 1
            self._set_leaf(blk)

    def full_evictable_size(self) -> int:
        return sum(len(b.slots) for b in self.blocks.values() if b.refs == 0)

    def full_protected_size(self) -> int:
        return sum(len(b.slots) for b in self.blocks.values() if b.refs > 0)

    # -- requests
    def _alloc(self, n: int) -> torch.Tensor | None:
        if n > self.pool.available_size():
            self.evict(n - self.pool.available_size())
        return self.pool.alloc(n)

    def alloc_request(self, req: Req) -> bool:
        match = self.match_prefix(req.key())
        self.inc_lock_ref(match.last_device_node)
        slots = self._alloc(len(req.token_ids) - len(match.device_indices))
        if slots is None:
            self.dec_lock_ref(match.last_device_node)
            return False
        req.kv_indices = torch.cat((match.device_indices, slots))
        req.prefix_len, req.last_node = len(match.device_indices), match.last_device_node
        return True

    def extend_request(self, req: Req, tokens: list[int]) -> bool:
        slots = self._alloc(len(tokens))
        if slots is None:
            return False
        req.token_ids.extend(tokens)
        req.kv_indices = torch.cat((req.kv_indices, slots))
        return True

    def _insert_req(self, req: Req) -> int:
        """Insert the request's whole settled blocks; free the slots the cache had already.

        Settled: a diffusion LLM's in-flight block (``req.unsettled`` tokens) still
        changes its ids in place, so caching it would cache each draft (#35270).
        """
        settled = req.settled_len()
        length = settled - settled % self.block
        prefix = self.insert(req.key(length), req.kv_indices[:length])
        self.pool.free(req.kv_indices[req.prefix_len : max(prefix, req.prefix_len)])
        return length

    def cache_unfinished_req(self, req: Req) -> None:
        self._insert_req(req)
        match = self.match_prefix(req.key())
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(match.last_device_node)
        new = match.device_indices
        req.kv_indices = torch.cat((new, req.kv_indices[len(new) :]))
        req.prefix_len, req.last_node = len(new), match.last_device_node

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """``is_insert=False``: aborted, failed or retracted; cache nothing, free its own slots."""
        length = self._insert_req(req) if is_insert else req.prefix_len
        self.pool.free(req.kv_indices[length:])
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    def release_aborted_request(self, req: Req) -> None:
        """A waiting request holds nothing in this cache until it is admitted."""

    # -- the rest of the protocol
    def check_hicache_events(self) -> None:
        """No host tier."""

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        cached = sum(len(b.slots) for b in self.blocks.values())
        if self.pool.available_size() + cached + outstanding_kv != self.pool.size:
            raise AssertionError("block cache: pool accounting disagrees with the blocks")

    def pool_accounting(self) -> dict[str, PoolAccount]:
        """One pool: free slots, slots of unreferenced blocks, slots of referenced ones."""
        books = PoolAccount.of(self.pool, self.full_evictable_size(), self.full_protected_size())
        return {"full": books}

    def stats(self) -> dict[str, float]:
        return {
            "blocks": len(self.blocks),
            "free_lru": len(self.free_lru),
            "kv_available": self.pool.available_size(),
        }

    def close(self) -> None:
        """Nothing to release."""


def make(
    inject: Sequence[str] = (), kv_size: int = 8192, block: int = 16, **_: Any
) -> BlockHashCache:
    """Factory for ``--target examples.own_cache:make``: ignores options it has no use for."""
    if inject:
        raise ValueError(f"BlockHashCache has no regressions to inject (got {list(inject)})")
    return BlockHashCache(SlotAllocator(kv_size), block)
