"""The Unified cache's components: per-node slots beside the full KV, one LRU list each.

A node holds, per component, its slots in ``comp_value[pt]`` (``None``: a
tombstone of that component) and its lock in ``comp_lock_ref[pt]`` (the full
lock stays the int ``lock_ref``, which the shared checks read). Each
component's LRU list keeps its pointers in the dict entries
``node.lru_prev[pt]`` / ``node.lru_next[pt]``, as in SGLang's unified tree; the
unlinking itself is ``LRUList._unlink`` (incident 1's site).
"""

from __future__ import annotations

from typing import Any

import torch

from refcache.checks import check_list_members
from refcache.lru import LRUList, Sentinel
from refcache.pools import SlotAllocator


def lock_of(node: Any, pt: str) -> int:
    ref: int = node.lock_ref if pt == "full" else node.comp_lock_ref.get(pt, 0)
    return ref


class _Sentinel(Sentinel):
    def __init__(self, pt: str) -> None:
        super().__init__()
        self.lru_prev: dict[str, Any] = {}
        self.lru_next: dict[str, Any] = {}
        self.lock_ref = 1  # sentinels count as locked so walks stop on them
        self.comp_lock_ref = {pt: 1}


class ComponentLRUList(LRUList):
    """An LRUList whose pointers are the dict entries ``lru_prev[pt]``/``lru_next[pt]``."""

    def __init__(self, pt: str, clear_pointers: bool) -> None:
        self.pt = pt  # _sentinel reads it during LRUList.__init__
        super().__init__(f"lru_prev[{pt}]", f"lru_next[{pt}]", f"lock[{pt}]", clear_pointers)

    def _sentinel(self) -> Any:
        return _Sentinel(self.pt)

    def _prev(self, node: Any) -> Any:
        return node.lru_prev.get(self.pt)

    def _next(self, node: Any) -> Any:
        return node.lru_next.get(self.pt)

    def _set_prev(self, node: Any, value: Any) -> None:
        node.lru_prev[self.pt] = value

    def _set_next(self, node: Any, value: Any) -> None:
        node.lru_next[self.pt] = value

    def _locked(self, node: Any) -> bool:
        return lock_of(node, self.pt) > 0


class Component:
    """One pool beside the full KV: per-node slots, an LRU list, lock accounting.

    The base is a Mamba-like state: one slot per node, valid only at the end of
    its sequence (a split leaves the upper half without one)."""

    def __init__(self, name: str, pool: SlotAllocator, clear_pointers: bool) -> None:
        self.name, self.pool = name, pool
        self.lst = ComponentLRUList(name, clear_pointers)
        self.evictable = self.protected = 0

    def units(self, node: Any) -> int:
        return 1

    def has(self, node: Any) -> bool:
        return node.comp_value.get(self.name) is not None

    def give(self, node: Any, slots: torch.Tensor) -> None:
        node.comp_value[self.name] = slots
        self.evictable += self.units(node)
        self.lst.insert_mru(node)

    def take(self, node: Any) -> None:
        """Free the node's slots here: it is a tombstone of this component from now on."""
        if lock_of(node, self.name):
            raise AssertionError(f"cannot free {self.name} of node {node.id}: it is locked")
        self.pool.free(node.comp_value[self.name])
        self.evictable -= self.units(node)
        self.lst.remove_node(node)
        node.comp_value[self.name] = None

    def lock(self, node: Any) -> None:
        if not self.has(node):
            raise AssertionError(f"{self.name} lock on tombstone {node.id}")
        if lock_of(node, self.name) == 0:
            self.evictable -= self.units(node)
            self.protected += self.units(node)
        node.comp_lock_ref[self.name] = lock_of(node, self.name) + 1

    def unlock(self, node: Any) -> None:
        ref = lock_of(node, self.name)
        if ref <= 0:
            raise AssertionError(f"{self.name} lock of node {node.id} would go negative")
        if ref == 1:
            self.evictable += self.units(node)
            self.protected -= self.units(node)
        node.comp_lock_ref[self.name] = ref - 1

    def split(self, new: Any, child: Any, split_len: int) -> None:
        new.comp_value[self.name], new.comp_lock_ref[self.name] = None, 0

    def check(self, nodes: list[Any]) -> int:
        """List and counters agree with the tree; return the pool slots outside it."""
        holders = [n for n in nodes if self.has(n)]
        check_list_members(self.lst, holders, self.name)
        evictable = sum(self.units(n) for n in holders if lock_of(n, self.name) == 0)
        protected = sum(self.units(n) for n in holders if lock_of(n, self.name) > 0)
        if (evictable, protected) != (self.evictable, self.protected):
            raise AssertionError(
                f"{self.name} sizes: tree {evictable}/{protected}, "
                f"counters {self.evictable}/{self.protected}"
            )
        return self.pool.used_size() - evictable - protected


class SWAComponent(Component):
    """One slot per token; split in two with the node."""

    def units(self, node: Any) -> int:
        return len(node.value)

    def split(self, new: Any, child: Any, split_len: int) -> None:
        slots = child.comp_value.get(self.name)
        new.comp_lock_ref[self.name] = lock_of(child, self.name)
        new.comp_value[self.name] = None if slots is None else slots[:split_len].clone()
        if slots is not None:
            child.comp_value[self.name] = slots[split_len:].clone()
        new.swa_uuid, child.swa_uuid = child.swa_uuid, None  # a window ending here ends higher
