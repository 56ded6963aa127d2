"""HostBackup: copies of device KV on a host-memory tier, and their accounting.

The first half of what the hierarchical caches (HiRadixCache and
HiMambaRadixCache) share; ``HostTier`` in ``refcache.host_tier`` adds load back
and the event round. Here: hit counting on insert and write-through to a host
pool at ``write_through_threshold`` hits, demotion of backed-up device leaves
to the host (the node stays, ``evicted``), host accounting and its invariants.

Invariants of the tiers: the device-resident nodes form a subtree at the root
(an evicted node's children are evicted); backed-up nodes form one as well
(``write_backup`` skips a node whose parent is not backed up), so a node that
is not backed up never has host-only descendants and host eviction can work
bottom-up from leaves.
"""

from __future__ import annotations

import dataclasses
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from typing import Any

import torch

from refcache.controller import CacheController
from refcache.keys import RadixKey, child_key, match_length
from refcache.node import BaseNode, tick
from refcache.pools import HostPool, PoolAccount, SlotAllocator, StatePool
from refcache.pp_sync import PPSync
from refcache.radix import RadixCache


class HostNode(BaseNode):
    """A node's host side: its host copy, whether a load is in flight, the host list links."""

    def __init__(self) -> None:
        super().__init__()
        self.host_value: torch.Tensor | None = None
        self.loading = False
        self.host_prev: Any = None
        self.host_next: Any = None

    @property
    def backuped(self) -> bool:
        return self.host_value is not None


def alloc_host_state(pool: StatePool, evict: Callable[[int], int]) -> torch.Tensor | None:
    """A host state slot, dropping the least recently used host state if the pool is full."""
    slot = pool.alloc(1)
    if slot is None:
        evict(1)
        slot = pool.alloc(1)
    return slot


class HostBackup(RadixCache, metaclass=ABCMeta):
    """Not used on its own: the base of ``HostTier``."""

    HOST_VIEW_REGRESSION = "hiradix-host-indices-view"

    cache_controller: CacheController

    def _init_host_tier(
        self,
        kv_pool: SlotAllocator,
        host_pool: HostPool,
        write_through_threshold: int,
        load_back_threshold: int,
        device_kv: torch.Tensor | None,
        latency_ticks: int,
        **state_pools: Any,
    ) -> None:
        """Called by each subclass before the base constructor runs ``reset``."""
        if device_kv is None:
            device_kv = torch.zeros((kv_pool.size, host_pool.buffer.shape[1]), dtype=torch.float16)
        self.host_pool = host_pool
        self.write_through_threshold = write_through_threshold
        self.load_back_threshold = load_back_threshold
        self.cache_controller = CacheController(device_kv, host_pool, latency_ticks, **state_pools)
        self.tp_group: Any = None
        self.pp: PPSync | None = None
        self.pp_payload = 1

    def reset(self) -> None:
        super().reset()
        self.host_evictable_size_ = 0  # host tokens of evicted nodes
        self.host_protected_size_ = 0  # host copies of nodes still on the device
        self.ongoing_write_through: dict[int, Any] = {}
        self.ongoing_load_back: dict[int, tuple[Any, Any]] = {}  # id -> (ancestor, last)
        self.kv_tokens_loaded_back = 0

    # ------------------------------------------------------------------ match
    def _matchable(self, node: Any) -> bool:
        return not node.evicted  # the device path ends at the first host-only node

    def _host_tail(self, node: Any, key: RadixKey) -> tuple[Any, int]:
        """Continue a match below the device path through host-only nodes."""
        length = 0
        while len(key) > 0:
            child = node.children.get(child_key(key, self.page_size))
            if child is None or not child.evicted:
                break
            n = match_length(child.key, key, self.page_size)
            if n < len(child.key):
                child = self._split_node(child, n)
            child.last_access_time = tick()
            length, node, key = length + n, child, key[n:]
        return node, length

    # ------------------------------------------------------------------ insert
    def insert(
        self, key: RadixKey, value: torch.Tensor, extra: dict[str, Any] | None = None
    ) -> int:
        """As RadixCache.insert, but host-only nodes on the path adopt the caller's
        slots (as new leaves do); the result counts only the device-resident prefix,
        so the caller frees exactly the duplicates."""
        extra = {} if extra is None else extra
        extra.update(hi_value=value, hi_offset=0, hi_device_hit=0)
        super().insert(key, value, extra)
        return int(extra["hi_device_hit"])

    def _on_insert_match(self, node: Any, extra: dict[str, Any]) -> None:
        super()._on_insert_match(node, extra)
        start = extra["hi_offset"]
        extra["hi_offset"] = start + len(node.key)
        if node.evicted:
            self._unevict(node, extra["hi_value"][start : start + len(node.key)])
        else:
            extra["hi_device_hit"] += len(node.key)
            self._inc_hit_count(node)

    def _leaf_extra(self, leaf: Any, extra: dict[str, Any]) -> None:
        super()._leaf_extra(leaf, extra)
        self._inc_hit_count(leaf)

    def _inc_hit_count(self, node: Any) -> None:
        node.hit_count += 1
        if not node.backuped and node.hit_count >= self.write_through_threshold:
            self.write_backup(node)

    # ------------------------------------------------------------------ write-through
    def write_backup(self, node: Any) -> int:
        """Start copying node's KV to the host; return the tokens, 0 if not now."""
        if not self._may_back_up(node):
            return 0
        n = len(node.value)
        shielded = self._shield_before_host_eviction()
        if shielded:
            self._lock_for_write(node)  # shields node from the host eviction below, then the copy
        host = self.host_pool.alloc(n)
        if host is None:
            self.evict_host(n)  # host eviction in the middle of an insert (incident 2's site)
            host = self.host_pool.alloc(n)
        if host is None:
            if shielded:
                self._unlock_after_write(node)
            return 0
        if not shielded:
            self._lock_for_write(node)  # SGLang locks once the write is queued
        # The fix of SGLang #21624 (0.5.10): the host pool hands out a view of its
        # free list; a long-lived node keeps a copy, or the view keeps every old
        # free-list storage alive (``hiradix-host-indices-view``).
        node.host_value = host if self.HOST_VIEW_REGRESSION in self.inject else host.clone()
        self.host_protected_size_ += n
        self.ongoing_write_through[node.id] = node
        self.cache_controller.write(node.value, host, node.id, self._backup_state(node))
        return n

    def _may_back_up(self, node: Any) -> bool:
        """Backups form a subtree at the root: a node whose parent has none waits.

        SGLang added this check in 0.5.11 (``write_backup``: "backed-up nodes
        must form a contiguous prefix from root"); HiMamba's incident 2 reverts it."""
        return node.parent is self.root_node or bool(node.parent.backuped)

    def _shield_before_host_eviction(self) -> bool:
        """Whether the node is locked before ``evict_host`` may run (else after the write).

        Locking first keeps the node out of the host eviction's tombstone cascade;
        SGLang locks after, which with the parent check above is safe too."""
        return True

    def _lock_for_write(self, node: Any) -> None:
        self.inc_lock_ref(node)

    def _unlock_after_write(self, node: Any) -> None:
        self.dec_lock_ref(node)

    def _backup_state(self, node: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        """hook: a (device, host) state slot pair to copy along with the KV."""
        return None

    @abstractmethod
    def evict_host(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` host tokens by deleting host-only leaves."""

    # ------------------------------------------------------------------ split
    def _split_node(self, child: Any, split_len: int) -> Any:
        if not child.evicted:
            return super()._split_node(child, split_len)
        new = self._new_node()
        new.parent, new.key = child.parent, child.key[:split_len]
        new.last_access_time, new.hit_count = child.last_access_time, child.hit_count
        child.key = child.key[split_len:]
        return self._finish_split(new, child, split_len)

    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        super()._split_extra(new, child, split_len)
        new.loading = child.loading
        if child.host_value is not None:
            new.host_value = child.host_value[:split_len].clone()
            child.host_value = child.host_value[split_len:].clone()

    # ------------------------------------------------------------------ device eviction
    def _evict_device_tokens(self, num_tokens: int) -> int:
        """Evict unlocked device leaves (no device children), LRU first."""
        evicted = 0
        x = self._next_device_leaf(self.full_lru_list.tail)
        while evicted < num_tokens and x is not None:
            evicted += self._evict_device_leaf(x)
            # eviction may turn the parent into a device leaf or delete it: rescan
            x = self._next_device_leaf(self.full_lru_list.tail)
        return evicted

    def _next_device_leaf(self, node: Any) -> Any:
        lst = self.full_lru_list
        x = lst._prev(node)
        while x is not lst.head and (x.lock_ref > 0 or self._has_device_child(x)):
            x = lst._prev(x)
        return None if x is lst.head else x

    @staticmethod
    def _has_device_child(node: Any) -> bool:
        return any(not c.evicted for c in node.children.values())

    @abstractmethod
    def _evict_device_leaf(self, x: Any) -> int:
        """Demote a backed-up device leaf, delete one that is not; tokens freed."""

    def _free_device_kv(self, node: Any) -> int:
        """Free a node's device KV slots (demotion, or before deleting it from the tree)."""
        n = len(node.value)
        self.kv_pool.free(node.value)
        self.full_evictable_size_ -= n
        self.full_lru_list.remove_node(node)
        node.value = None
        return n

    def _demote(self, x: Any) -> int:
        """Free a backed-up node's device KV; it stays in the tree, host-only."""
        n = self._free_device_kv(x)
        self.host_protected_size_ -= len(x.host_value)
        self.host_evictable_size_ += len(x.host_value)
        return n

    def _unevict(self, node: Any, value: torch.Tensor) -> None:
        """Give a host-only node device slots again (insert adoption or load back)."""
        node.value = value.clone()
        self.full_evictable_size_ += len(value)
        self.full_lru_list.insert_mru(node)
        self.host_evictable_size_ -= len(node.host_value)
        self.host_protected_size_ += len(node.host_value)
        self._on_unevict(node)

    def _on_unevict(self, node: Any) -> None:
        """hook: take a node that is on the device again out of host candidates."""

    def _free_host(self, node: Any) -> int:
        n = len(node.host_value)
        self.host_pool.free(node.host_value)
        if node.evicted:
            self.host_evictable_size_ -= n
        else:
            self.host_protected_size_ -= n
        node.host_value = None
        return n

    # ------------------------------------------------------------------ introspection
    def host_evictable_size(self) -> int:
        return self.host_evictable_size_

    def host_protected_size(self) -> int:
        return self.host_protected_size_

    def pool_accounting(self) -> dict[str, PoolAccount]:
        """The device books say which locks only copies in flight hold; the host
        pool has no request-held slots, so its books balance at any moment."""
        books = super().pool_accounting()
        books["full"] = dataclasses.replace(books["full"], in_transfer=self._transfer_locked())
        host = PoolAccount.of(
            self.host_pool, self.host_evictable_size(), self.host_protected_size()
        )
        return {**books, "host": host}

    def _transfer_locked(self) -> int:
        """Device tokens locked by in-flight copies and by nothing else.

        Each write-through and load back holds one lock on its node's path to
        the root; a node whose ``lock_ref`` is no more than the copies below it
        would be unlocked once they complete. Only those paths are walked."""
        copies: dict[int, int] = {}
        on_path: dict[int, Any] = {}
        for node in self._nodes_in_transfer():
            while node is not self.root_node:
                copies[node.id] = copies.get(node.id, 0) + 1
                on_path[node.id] = node
                node = node.parent
        return sum(len(n.value) for i, n in on_path.items() if n.lock_ref <= copies[i])

    def _nodes_in_transfer(self) -> list[Any]:
        writes = list(self.ongoing_write_through.values())
        return writes + [node for _, node in self.ongoing_load_back.values()]

    def _in_full_list(self, node: Any) -> bool:
        return not node.evicted

    def _check_host(self, nodes: list[Any]) -> None:
        """Tier invariants and host accounting (tree vs counters vs pool)."""
        evictable = protected = 0
        for n in nodes:
            if n is self.root_node:
                continue
            bad = not n.backuped or n.lock_ref or n.loading or self._has_device_child(n)
            if n.evicted and bad:
                raise AssertionError(f"host-only node {n.id}: no backup, locked or device children")
            if n.backuped and n.parent is not self.root_node and not n.parent.backuped:
                raise AssertionError(f"node {n.id} backed up below a node that is not")
            if n.backuped:
                evictable += len(n.host_value) if n.evicted else 0
                protected += 0 if n.evicted else len(n.host_value)
        if (evictable, protected) != (self.host_evictable_size_, self.host_protected_size_):
            raise AssertionError(
                f"host sizes: tree has {evictable}/{protected}, counters say "
                f"{self.host_evictable_size_}/{self.host_protected_size_}"
            )
        if self.host_pool.used_size() != evictable + protected:
            raise AssertionError(
                f"host pool: {self.host_pool.used_size()} used != {evictable + protected} in tree"
            )
        for node in self.ongoing_write_through.values():
            if node.lock_ref <= 0 or not node.backuped:
                raise AssertionError(f"write of node {node.id} in flight but unlocked")
