"""MambaRadixCache: full KV plus one recurrent (Mamba) state per cached prefix.

Two LRU lists: ``full`` (every node) and ``mamba`` (nodes that hold a state).
A state is only valid at the end of a sequence, so a split creates an internal
node without one (a *tombstone*), and evicting states tombstones internal nodes
while keeping their KV. Leaves are never tombstones: evicting a leaf deletes
the childless tombstones above it ("cascade deletion").

Incident 1 lives here: the two lists leave removed nodes' pointers set under
``mamba-lru-unlink``. A tombstoned parent keeps ``mamba_prev`` pointing at its
own child (children sit just MRU-side of their parent); once both are deleted,
``parent.mamba_prev -> child`` and ``child.parent -> parent`` form a cycle.

Incident 7 (SGLang #16067) lives in ``_unschedule_request_state``: under
``mamba-slot-failed-schedule`` a request whose KV allocation fails keeps the
state slot it was given, and the idle books of the Mamba pool come up short.

SGLang #12693 lives in ``_release_waiting_state``: the policy's match forks the
matched state into a slot the waiting request owns (``match_waiting_req``);
under ``mamba-abort-queued-slot`` an abort of the waiting request drops the
request without freeing that slot.
"""

from __future__ import annotations

from typing import Any

import torch

from refcache.checks import check_links, check_list_members
from refcache.hybrid import HybridRadixCache
from refcache.keys import RadixKey, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode
from refcache.pools import PoolAccount, SlotAllocator, StatePool
from refcache.radix import MatchResult
from refcache.req import Req


class TreeNode(BaseNode):
    def __init__(self) -> None:
        super().__init__()
        self.mamba_value: torch.Tensor | None = None
        self.mamba_lock_ref = 0
        self.mamba_prev: Any = None
        self.mamba_next: Any = None


FAILED_SCHEDULE = "mamba-slot-failed-schedule"
ABORT_QUEUED = "mamba-abort-queued-slot"


def _has_state(node: Any) -> bool:
    return node.mamba_value is not None


class MambaRadixCache(HybridRadixCache):
    node_cls = TreeNode
    regression = "mamba-lru-unlink"

    def __init__(
        self,
        kv_pool: SlotAllocator,
        mamba_pool: StatePool,
        page_size: int = 1,
        inject: tuple[str, ...] = (),
    ) -> None:
        self.mamba_pool = mamba_pool
        super().__init__(kv_pool, page_size, inject)

    def reset(self) -> None:
        super().reset()
        self.root_node.mamba_lock_ref = 1
        self.mamba_evictable_size_ = 0
        self.mamba_protected_size_ = 0
        self.mamba_lru_list = LRUList(
            "mamba_prev", "mamba_next", "mamba_lock_ref", self._clears_pointers()
        )

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Match only up to the deepest node that holds a state: a request can
        resume from a cached state, never from the middle of a sequence."""
        key = key[: page_aligned(len(key), self.page_size)]
        values, last = self._match_helper(key)
        best, depth = last, sum(len(v) for v in values)
        while best is not self.root_node and best.mamba_value is None:
            depth -= len(best.value)
            best = best.parent
        indices = torch.cat(values)[:depth] if values else torch.empty(0, dtype=torch.int64)
        return MatchResult(indices, best, best)

    def _touch(self, node: Any) -> None:
        super()._touch(node)
        if node is not self.root_node:
            self.mamba_lru_list.reset_node_and_parents_mru(node, self.root_node, _has_state)

    # ------------------------------------------------------------------ insert
    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        new.mamba_value = None  # a state is valid only at the end of its sequence
        new.mamba_lock_ref = 0

    def _leaf_extra(self, leaf: Any, extra: dict[str, Any]) -> None:
        self._give_state(leaf, extra)

    def _on_insert_end(self, node: Any, extra: dict[str, Any]) -> None:
        if node is not self.root_node and node.mamba_value is None:
            self._give_state(node, extra)  # revives a tombstone
        else:
            extra["mamba_exist"] = True

    def _give_state(self, node: Any, extra: dict[str, Any]) -> None:
        node.mamba_value = extra["mamba_value"]
        self.mamba_evictable_size_ += 1
        self.mamba_lru_list.insert_mru(node)

    def insert_with_state(
        self, key: RadixKey, value: torch.Tensor, state: torch.Tensor
    ) -> tuple[int, bool]:
        """Insert; return (prefix_len, mamba_exist). If the state already
        existed the caller still owns ``state`` and must free it."""
        extra: dict[str, Any] = {"mamba_value": state, "mamba_exist": False}
        prefix = self.insert(key, value, extra)
        return prefix, bool(extra["mamba_exist"])

    def insert(
        self, key: RadixKey, value: torch.Tensor, extra: dict[str, Any] | None = None
    ) -> int:
        if extra is None or "mamba_value" not in extra:
            raise ValueError("MambaRadixCache.insert needs mamba_value (use insert_with_state)")
        if page_aligned(len(key), self.page_size) == 0:
            extra["mamba_exist"] = True  # nothing to attach a state to
            return 0
        return super().insert(key, value, extra)

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int, mamba_num: int = 0, **_: int) -> int:
        evicted = self.evict_full(num_tokens) if num_tokens > 0 else 0
        if mamba_num > 0:
            self.evict_mamba(mamba_num)
        return evicted

    def evict_mamba(self, mamba_num: int) -> int:
        evicted = 0
        x = self.mamba_lru_list.lru_no_lock()
        while evicted < mamba_num and x is not None:
            x_next = self.mamba_lru_list.prev_no_lock(x)
            if x.children:
                self._tombstone_internal_node(x)
            else:
                self._evict_leaf_node(x)
            evicted += 1
            x = x_next
        return evicted

    def _tombstone_internal_node(self, x: Any) -> None:
        self.mamba_pool.free(x.mamba_value)
        self.mamba_evictable_size_ -= 1
        self.mamba_lru_list.remove_node(x)
        x.mamba_value = None

    def _evict_leaf_node(self, x: Any) -> tuple[int, Any]:
        """Delete an unlocked leaf and the childless tombstones above it.

        Returns the KV tokens freed and the last node deleted."""
        if x.lock_ref or x.mamba_lock_ref or x.mamba_value is None:
            raise AssertionError(f"cannot evict leaf {x.id}: locked or a tombstone")
        self.mamba_pool.free(x.mamba_value)
        self.mamba_evictable_size_ -= 1
        self.mamba_lru_list.remove_node(x)
        evicted = self._evict_leaf(x)
        while self._is_deletable_tombstone(x.parent):
            x = x.parent
            evicted += self._evict_leaf(x)
        return evicted, x

    def _is_deletable_tombstone(self, node: Any) -> bool:
        return bool(
            node is not self.root_node
            and not node.children
            and node.mamba_value is None
            and node.lock_ref == 0
        )

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: Any) -> None:
        if node.mamba_value is not None:
            if node.mamba_lock_ref == 0:
                self.mamba_evictable_size_ -= 1
                self.mamba_protected_size_ += 1
            node.mamba_lock_ref += 1
        super().inc_lock_ref(node)

    def dec_lock_ref(self, node: Any) -> None:
        if node.mamba_value is not None and node is not self.root_node:
            if node.mamba_lock_ref <= 0:
                raise AssertionError(f"mamba_lock_ref of node {node.id} would go negative")
            if node.mamba_lock_ref == 1:
                self.mamba_evictable_size_ += 1
                self.mamba_protected_size_ -= 1
            node.mamba_lock_ref -= 1
        super().dec_lock_ref(node)

    def mamba_evictable_size(self) -> int:
        return self.mamba_evictable_size_

    def mamba_protected_size(self) -> int:
        return self.mamba_protected_size_

    # ------------------------------------------------------------------ requests
    def alloc_state_slot(self) -> torch.Tensor | None:
        if self.mamba_pool.available_size() < 1:
            self.evict_mamba(1)
        return self.mamba_pool.alloc(1)

    def match_waiting_req(self, req: Req) -> None:
        """Fork the matched prefix's state into a slot the waiting request owns
        (SGLang's copy-on-write match); the matched node is locked while a slot is
        made, so that making room cannot evict the state being copied."""
        if req.state_slot is not None:
            return
        node = self.match_prefix(req.key()).last_device_node
        if node is self.root_node or node.mamba_value is None:
            return
        self.inc_lock_ref(node)
        slot = self.alloc_state_slot()
        self.dec_lock_ref(node)
        if slot is not None:
            self.mamba_pool.copy_from(node.mamba_value, slot)
            req.state_slot = slot

    def _release_waiting_state(self, req: Req) -> None:
        # SGLang #12693: the abort dropped the request with the slot its match forked.
        if req.state_slot is not None and ABORT_QUEUED not in self.inject:
            self.mamba_pool.free(req.state_slot)
        req.state_slot = None

    def _release_request_state(self, req: Req) -> None:
        if req.state_slot is not None:
            self.mamba_pool.free(req.state_slot)
        req.state_slot = None

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        slot = req.state_slot if req.state_slot is not None else self.alloc_state_slot()
        if slot is None:
            return False
        node = match.last_device_node
        if node.mamba_value is not None:
            self.mamba_pool.copy_from(node.mamba_value, slot)  # copy-on-write
        req.state_slot = slot
        return True

    def _unschedule_request_state(self, req: Req) -> None:
        # Incident #16067: the failed request kept its slot; the idle check then
        # finds the Mamba pool a slot short ("leaked_mamba_pages") and kills the server.
        if req.state_slot is not None and FAILED_SCHEDULE not in self.inject:
            self.mamba_pool.free(req.state_slot)
        req.state_slot = None

    def cache_unfinished_req(self, req: Req) -> None:
        """Insert a copy of the request's state (the request keeps computing in its own)."""
        donated = self.alloc_state_slot()
        if donated is None:
            raise MemoryError("mamba pool exhausted by locked states")
        assert req.state_slot is not None
        self.mamba_pool.copy_from(req.state_slot, donated)
        length = page_aligned(len(req.kv_indices), self.page_size)
        prefix, exist = self.insert_with_state(req.key(length), req.kv_indices[:length], donated)
        if exist:
            self.mamba_pool.free(donated)
        self.kv_pool.free(req.kv_indices[req.prefix_len : max(prefix, req.prefix_len)])
        self._relock(req, length)

    def _relock(self, req: Req, length: int) -> None:
        values, last = self._match_helper(req.key(length))
        new = torch.cat(values) if values else torch.empty(0, dtype=torch.int64)
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(last)
        req.kv_indices = torch.cat((new, req.kv_indices[len(new) :]))
        req.prefix_len, req.last_node = len(new), last

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """Give the request's own state slot to the tree (freed if one existed)."""
        if not is_insert:  # abort, failure, retraction: nothing is cached
            self.release_running_req(req)
            return
        length = page_aligned(len(req.kv_indices), self.page_size)
        assert req.state_slot is not None
        prefix, exist = self.insert_with_state(
            req.key(length), req.kv_indices[:length], req.state_slot
        )
        if exist:
            self.mamba_pool.free(req.state_slot)
        req.state_slot = None
        self.kv_pool.free(req.kv_indices[req.prefix_len : max(prefix, req.prefix_len)])
        self.kv_pool.free(req.kv_indices[length:])
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        tombstones = sum(1 for n in self.iter_nodes() if n.mamba_value is None) - 1
        return {
            **super().stats(),
            "mamba_lru": len(self.mamba_lru_list),
            "mamba_available": self.mamba_pool.available_size(),
            "mamba_evictable": self.mamba_evictable_size_,
            "mamba_protected": self.mamba_protected_size_,
            "tombstones": tombstones,
        }

    def pool_accounting(self) -> dict[str, PoolAccount]:
        mamba = PoolAccount.of(
            self.mamba_pool, self.mamba_evictable_size(), self.mamba_protected_size()
        )
        return {**super().pool_accounting(), "mamba": mamba}

    def pool_allocators(self) -> dict[str, Any]:
        return {**super().pool_allocators(), "mamba": self.mamba_pool}

    def held_slots(self) -> dict[str, torch.Tensor]:
        states = [n.mamba_value.reshape(-1) for n in self.iter_nodes()
                  if n is not self.root_node and n.mamba_value is not None]
        return {**super().held_slots(),
                "mamba": torch.cat(states) if states else torch.empty(0, dtype=torch.int64)}

    def _sanity_extra(self, outstanding_states: int) -> None:
        nodes = check_links(self)
        stateful = [n for n in nodes if n is not self.root_node and n.mamba_value is not None]
        check_list_members(self.mamba_lru_list, stateful, "mamba")
        for n in nodes:
            if n is not self.root_node and not n.children and n.mamba_value is None:
                raise AssertionError(f"leaf {n.id} is a tombstone")
        self._check_state_counts(stateful, outstanding_states)

    def _check_state_counts(self, stateful: list[Any], outstanding_states: int) -> None:
        """Counters and pool agree with the nodes holding a device state (and requests)."""
        locked = sum(1 for n in stateful if n.mamba_lock_ref > 0)
        if (len(stateful) - locked, locked) != (
            self.mamba_evictable_size_,
            self.mamba_protected_size_,
        ):
            raise AssertionError("mamba evictable/protected counters disagree with the tree")
        used = self.mamba_pool.used_size()
        if used != len(stateful) + outstanding_states:
            raise AssertionError(
                f"mamba pool: {used} used != {len(stateful)} in tree"
                f" + {outstanding_states} in requests"
            )
