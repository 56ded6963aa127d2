"""SWARadixCache: full KV plus sliding-window (SWA) KV per token.

Each cached token has a full KV slot (``value``) and a slot in a separate,
smaller SWA pool (``swa_value``). SWA eviction may free an internal node's SWA
slots and keep its full KV (``swa_tombstone``). Two LRU lists: ``full``
(``prev``/``next``, ``lock_ref``) and ``swa`` (non-tombstones only,
``swa_prev``/``swa_next``, ``swa_lock_ref``). The window rules (match, locks,
insert ownership) live in ``refcache.swa_window``, shared with the Unified
cache. Running requests keep all their SWA slots unless ``free_out_of_window``
is on (SGLang's default since #34653): then an unfinished request's insert
first frees the SWA its tokens no longer need (``refcache.swa_window``).
``eagle`` keys the tree by bigrams, as SGLang does under EAGLE speculative
decoding (``refcache.keys.bigram_key``).

Incident 1 (``swa-lru-unlink``): a tombstoned parent keeps ``swa_prev``
pointing at its child (children sit just MRU-side of their parent); once the
child is evicted and the childless tombstone cascade-deleted,
``parent.swa_prev -> child`` and ``child.parent -> parent`` form a cycle.
"""

from __future__ import annotations

from typing import Any

import torch

from refcache.checks import check_links, check_list_members
from refcache.hybrid import HybridRadixCache
from refcache.keys import RadixKey, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode
from refcache.pools import PoolAccount, SlotAllocator
from refcache.radix import MatchResult
from refcache.req import Req
from refcache.swa_window import (
    dead_head,
    drop_own_swa,
    keep_own_swa,
    leaf_segment,
    own_swa,
    reject_swa,
    release_out_of_window,
    release_window_lock,
    revival_split,
    revive_or_free,
    swa_frontier,
    swa_start,
    take_window_lock,
    window_match,
)

__all__ = ["SWARadixCache", "TreeNode"]


class TreeNode(BaseNode):
    def __init__(self) -> None:
        super().__init__()
        self.swa_value: torch.Tensor | None = None
        self.swa_tombstone = False
        self.swa_lock_ref = 0
        self.swa_prev: Any = None
        self.swa_next: Any = None
        self.swa_uuid: int | None = None  # set on a node where some lock's window ends
        self.swa_lock_uuids: list[int | None] = []  # one per lock taken at this node


def _holds_swa(node: Any) -> bool:
    return not node.swa_tombstone


class SWARadixCache(HybridRadixCache):
    node_cls = TreeNode
    regression = "swa-lru-unlink"
    FRONTIER_REGRESSION = "swa-eagle-frontier"

    def __init__(
        self,
        kv_pool: SlotAllocator,
        swa_pool: SlotAllocator,
        sliding_window: int,
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        eagle: bool = False,
        free_out_of_window: bool = False,
    ) -> None:
        if sliding_window < 1:
            raise ValueError(f"sliding_window must be at least 1, got {sliding_window}")
        self.swa_pool = swa_pool
        self.sliding_window = sliding_window
        self.bigram_keys, self.free_out_of_window = eagle, free_out_of_window
        super().__init__(kv_pool, page_size, inject)

    def reset(self) -> None:
        super().reset()
        self.root_node.swa_value = torch.empty(0, dtype=torch.int64)
        self.root_node.swa_lock_ref = 1
        self.swa_evictable_size_ = 0
        self.swa_protected_size_ = 0
        self.swa_lru_list = LRUList("swa_prev", "swa_next", "swa_lock_ref", self._clears_pointers())

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        key = key[: page_aligned(len(key), self.page_size)]
        values, last = self._match_helper(key)
        best, depth = window_match(self.root_node, last, self.sliding_window, _holds_swa)
        indices = torch.cat(values)[:depth] if values else torch.empty(0, dtype=torch.int64)
        return MatchResult(indices, best, best)

    def _touch(self, node: Any) -> None:
        super()._touch(node)
        if node is not self.root_node:
            self.swa_lru_list.reset_node_and_parents_mru(node, self.root_node, _holds_swa)

    # ------------------------------------------------------------------ split
    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        new.swa_tombstone, new.swa_lock_ref = child.swa_tombstone, child.swa_lock_ref
        if child.swa_value is not None:
            new.swa_value = child.swa_value[:split_len].clone()
            child.swa_value = child.swa_value[split_len:].clone()
        new.swa_uuid, child.swa_uuid = child.swa_uuid, None  # a window ending here ends higher

    def _list_insert_split(self, new: Any, child: Any) -> None:
        super()._list_insert_split(new, child)
        if not new.swa_tombstone:
            self.swa_lru_list.members[new.id] = new
            self.swa_lru_list._link_after(child, new)

    # ------------------------------------------------------------------ insert
    def insert_with_swa(
        self, key: RadixKey, value: torch.Tensor, swa_owned: torch.Tensor, swa_from: int = 0
    ) -> int:
        """Insert; ``swa_owned[i]`` is the SWA slot of token ``swa_from + i``.

        The tree takes those over up to the page-aligned key length: new leaves
        and revived tombstones adopt them, duplicates are freed. Duplicate KV
        slots stay the caller's to free, as for RadixCache.
        """
        return self.insert(key, value, {"swa_owned": swa_owned, "swa_from": swa_from})

    def insert(
        self, key: RadixKey, value: torch.Tensor, extra: dict[str, Any] | None = None
    ) -> int:
        if extra is None or "swa_owned" not in extra:
            raise ValueError("SWARadixCache.insert needs SWA slots (use insert_with_swa)")
        extra.setdefault("swa_from", 0)
        extra["offset"] = 0  # token position of the node the hooks see (next_segment)
        return super().insert(key, value, extra)

    def _on_insert_match(self, node: Any, extra: dict[str, Any]) -> None:
        super()._on_insert_match(node, extra)
        head = revival_split(extra, node, node.swa_tombstone)
        if head:  # the tail is revived below, the head stays a tombstone
            self._split_node(node, head)
            extra["offset"] += head
        revive_or_free(extra, node, node.swa_tombstone, self._give_swa, self.swa_pool)

    def _add_leaf(self, parent: Any, key: RadixKey, value: torch.Tensor, extra: Any) -> Any:
        """A new leaf; the head whose SWA the caller freed out of window hangs above it
        as a tombstone (SGLang's insert splits at ``swa_evicted_seqlen``)."""
        dead = dead_head(extra, len(key))
        if dead:
            parent = super()._add_leaf(parent, key[:dead], value[:dead], {"tombstone": True})
            extra["offset"] += dead
            key, value = key[dead:], value[dead:]
        return super()._add_leaf(parent, key, value, extra)

    def _leaf_extra(self, leaf: Any, extra: dict[str, Any]) -> None:
        if extra.get("tombstone"):
            leaf.swa_tombstone = True  # it gets its child right after: an internal tombstone
            return
        self._give_swa(leaf, leaf_segment(extra, len(leaf.key)))

    def _give_swa(self, node: Any, slots: torch.Tensor) -> None:
        node.swa_value, node.swa_tombstone = slots, False
        self.swa_evictable_size_ += len(slots)
        self.swa_lru_list.insert_mru(node)

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int, swa_num: int = 0, **_: int) -> int:
        evicted = self.evict_full(num_tokens) if num_tokens > 0 else 0
        if swa_num > 0:
            self.evict_swa(swa_num)
        return evicted

    def evict_swa(self, num_tokens: int) -> int:
        """Free SWA slots LRU first: tombstone internal nodes, delete leaves."""
        evicted = 0
        x = self.swa_lru_list.lru_no_lock()
        while evicted < num_tokens and x is not None:
            x_next = self.swa_lru_list.prev_no_lock(x)
            evicted += len(x.value)
            if x.children:
                self._tombstone(x)
            else:
                self._evict_leaf_node(x)  # the cascade deletes tombstones only: x_next stays
            x = x_next
        return evicted

    def _tombstone(self, x: Any) -> None:
        if x.swa_lock_ref:
            raise AssertionError(f"cannot free SWA of node {x.id}: it is in a locked window")
        self.swa_pool.free(x.swa_value)
        self.swa_evictable_size_ -= len(x.value)
        self.swa_lru_list.remove_node(x)
        x.swa_value, x.swa_tombstone = None, True

    def _evict_leaf_node(self, x: Any) -> tuple[int, Any]:
        """Delete an unlocked leaf and the childless unlocked tombstones above it.

        Returns the KV tokens freed and the last node deleted."""
        if x.lock_ref or x.swa_tombstone:
            raise AssertionError(f"cannot evict leaf {x.id}: locked or a tombstone")
        self._tombstone(x)
        evicted = self._evict_leaf(x)
        while x.parent is not self.root_node and not x.parent.children:
            if not x.parent.swa_tombstone or x.parent.lock_ref:
                break
            x = x.parent
            evicted += self._evict_leaf(x)
        return evicted, x

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: Any) -> None:
        if node is not self.root_node:
            take_window_lock(node, self.root_node, self.sliding_window, self._swa_lock)
        super().inc_lock_ref(node)

    def dec_lock_ref(self, node: Any) -> None:
        if node is not self.root_node:
            release_window_lock(node, self.root_node, self._swa_unlock)
        super().dec_lock_ref(node)

    def _swa_lock(self, node: Any) -> None:
        if node.swa_tombstone:
            raise AssertionError(f"SWA lock over tombstone {node.id}")
        if node.swa_lock_ref == 0:
            self.swa_evictable_size_ -= len(node.value)
            self.swa_protected_size_ += len(node.value)
        node.swa_lock_ref += 1

    def _swa_unlock(self, node: Any) -> None:
        if node.swa_lock_ref <= 0:
            raise AssertionError(f"swa_lock_ref of node {node.id} would go negative")
        if node.swa_lock_ref == 1:
            self.swa_evictable_size_ += len(node.value)
            self.swa_protected_size_ -= len(node.value)
        node.swa_lock_ref -= 1

    def swa_evictable_size(self) -> int:
        return self.swa_evictable_size_

    def swa_protected_size(self) -> int:
        return self.swa_protected_size_

    # ------------------------------------------------------------------ requests
    def alloc_swa(self, n: int) -> torch.Tensor | None:
        """n SWA slots, tombstoning or evicting unlocked nodes first if short."""
        short = n - self.swa_pool.available_size()
        if short > 0:
            self.evict_swa(short)
        return self.swa_pool.alloc(n)

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        slots = self.alloc_swa(len(req.token_ids) - len(match.device_indices))
        if slots is not None:
            req.aux["swa_indices"] = slots
        return slots is not None

    # Takes no ``slots`` (KV slots allocated before, for overlap scheduling): a decoded
    # token here needs an SWA slot too, so the scheduler runs this cache without overlap.
    def extend_request(self, req: Req, tokens: list[int]) -> bool:  # type: ignore[override]
        return self._extend_with_swa(req, tokens, self.alloc_swa(len(tokens)), self.swa_pool)

    def _insert_req(self, req: Req) -> int:
        """Insert the request's page-aligned key, free its duplicate KV; return its length."""
        length = page_aligned(self.key_units(len(req.kv_indices)), self.page_size)
        own, start = own_swa(req), swa_start(req)
        key = self.request_key(req, length)
        prefix = self.insert_with_swa(key, req.kv_indices[:length], own, start)
        self.kv_pool.free(req.kv_indices[req.prefix_len : max(prefix, req.prefix_len)])
        taken = max(0, length - start)  # the tree took the rest
        keep_own_swa(req, own[taken:], max(start, length))
        return length

    def cache_unfinished_req(self, req: Req) -> None:
        if self.free_out_of_window:
            self._free_out_of_window(req)
        self._resume_at(req, self._insert_req(req))

    def _free_out_of_window(self, req: Req) -> None:
        """Before the insert, free the SWA the request's tokens slid out of (SGLang:
        ``free_out_of_window_slots(req, len(radix_key) - 1)`` in the unfinished path).

        The frontier keeps a window below the end of the key; under
        ``swa-eagle-frontier`` (SGLang #34870) it is measured from the token count,
        which a bigram key is one short of: at a page boundary the insert ends a page
        lower than the frontier assumed and the leaf keeps less than a window."""
        spans = (len(req.token_ids) if self.FRONTIER_REGRESSION in self.inject
                 else self.key_units(len(req.kv_indices)))
        frontier = swa_frontier(spans - 1, self.sliding_window, self.page_size)
        release_out_of_window(req, frontier, self.swa_pool)

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        if not is_insert:  # abort, failure, retraction: nothing is cached
            self.release_running_req(req)
            return
        length = self._insert_req(req)
        self.kv_pool.free(req.kv_indices[length:])  # the unaligned tail is not cached
        self.swa_pool.free(drop_own_swa(req))
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    def _release_request_state(self, req: Req) -> None:
        self.swa_pool.free(drop_own_swa(req))

    def _reject_request_state(self, req: Req, n: int) -> None:
        reject_swa(req, n, self.swa_pool)

    def _unschedule_request_state(self, req: Req) -> None:
        self._release_request_state(req)  # KV did not fit: its SWA slots go back too

    def held_by(self, req: Req) -> dict[str, int]:
        """Slots the request holds outside the tree, per pool."""
        return {"kv": len(req.kv_indices) - req.prefix_len, "swa": len(own_swa(req))}

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            "swa_lru": len(self.swa_lru_list),
            "swa_available": self.swa_pool.available_size(),
            "swa_evictable": self.swa_evictable_size_,
            "swa_protected": self.swa_protected_size_,
            "tombstones": sum(1 for n in self.iter_nodes() if n.swa_tombstone),
        }

    def pool_accounting(self) -> dict[str, PoolAccount]:
        swa = PoolAccount.of(self.swa_pool, self.swa_evictable_size(), self.swa_protected_size())
        return {**super().pool_accounting(), "swa": swa}

    def _sanity_extra(self, outstanding_states: int) -> None:
        """``outstanding_states``: the SWA slots running requests hold (``held_by``)."""
        nodes = [n for n in check_links(self) if n is not self.root_node]
        for n in nodes:
            self._check_node(n)
        live = [n for n in nodes if not n.swa_tombstone]
        check_list_members(self.swa_lru_list, live, "swa")
        evictable = sum(len(n.value) for n in live if n.swa_lock_ref == 0)
        protected = sum(len(n.value) for n in live if n.swa_lock_ref > 0)
        if (evictable, protected) != (self.swa_evictable_size_, self.swa_protected_size_):
            raise AssertionError(
                f"swa sizes: tree has {evictable}/{protected}, counters say "
                f"{self.swa_evictable_size_}/{self.swa_protected_size_}"
            )
        available = self.swa_pool.available_size()
        if available + evictable + protected + outstanding_states != self.swa_pool.size:
            raise AssertionError(
                f"swa pool: available {available} + evictable {evictable} + protected "
                f"{protected} + requests {outstanding_states} != {self.swa_pool.size}"
            )

    def _check_node(self, n: Any) -> None:
        if n.swa_tombstone != (n.swa_value is None) or (not n.children and n.swa_tombstone):
            raise AssertionError(f"node {n.id}: tombstone flag wrong or a tombstone leaf")
        if n.swa_value is not None and len(n.swa_value) != len(n.value):
            raise AssertionError(f"node {n.id}: {len(n.swa_value)} SWA slots, {len(n.value)} KV")
        if not 0 <= n.swa_lock_ref <= n.lock_ref or (n.swa_tombstone and n.swa_lock_ref):
            raise AssertionError(f"node {n.id}: swa_lock_ref {n.swa_lock_ref}, lock {n.lock_ref}")
