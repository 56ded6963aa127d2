"""UnifiedTree: the Unified cache's tree side, one LRU list per component.

Per component the semantics are MambaRadixCache's (``Component``: a state at
the end of a sequence, locked on the locked node only) and SWARadixCache's
(``SWAComponent``: a slot per token, locked over the last window; the window
helpers come from ``refcache.swa_window``). Leaves hold every component. This
class matches, splits, inserts, evicts and locks; ``UnifiedRadixCache`` (in
``refcache.unified``) adds requests, the PP event round and the checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from refcache.components import Component, ComponentLRUList, SWAComponent
from refcache.hybrid import HybridRadixCache
from refcache.keys import RadixKey, page_aligned
from refcache.lru import LRUList
from refcache.pools import SlotAllocator, StatePool
from refcache.radix import MatchResult
from refcache.swa_window import (
    dead_head,
    leaf_segment,
    release_window_lock,
    revival_split,
    revive_or_free,
    take_window_lock,
    window_match,
)

KINDS = ("full", "mamba", "swa")


def _always(node: Any) -> bool:
    return True


class UnifiedTree(HybridRadixCache):
    """Not used on its own: the base of ``UnifiedRadixCache``."""

    def __init__(
        self,
        kv_pool: SlotAllocator,
        components: Mapping[str, SlotAllocator],
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        sliding_window: int | None = None,
    ) -> None:
        unknown = sorted(set(components) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown components {unknown}; known: {', '.join(KINDS)}")
        if components.get("full", kv_pool) is not kv_pool:
            raise ValueError("component 'full' must be the kv_pool")
        mamba_pool = components.get("mamba")
        if mamba_pool is not None and not isinstance(mamba_pool, StatePool):
            raise TypeError("component 'mamba' needs a StatePool")
        if "swa" in components and (sliding_window is None or sliding_window < 1):
            raise ValueError("component 'swa' needs sliding_window >= 1")
        self.mamba_pool, self.swa_pool = mamba_pool, components.get("swa")
        self.sliding_window = sliding_window if "swa" in components and sliding_window else 0
        super().__init__(kv_pool, page_size, inject)

    def reset(self) -> None:
        super().reset()
        clear = self._clears_pointers()
        self.mamba: Component | None = None
        self.swa: SWAComponent | None = None
        if self.mamba_pool is not None:
            self.mamba = Component("mamba", self.mamba_pool, clear)
        if self.swa_pool is not None:
            self.swa = SWAComponent("swa", self.swa_pool, clear)
        self.comps = [c for c in (self.mamba, self.swa) if c is not None]
        for c in self.comps:
            self.root_node.comp_lock_ref[c.name] = 1

    def _make_full_lru_list(self) -> LRUList:
        return ComponentLRUList("full", self._clears_pointers())

    # ------------------------------------------------------------------ match and split
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Match up to the deepest node holding a state whose last window holds SWA."""
        key = key[: page_aligned(len(key), self.page_size)]
        values, last = self._match_helper(key)
        holds = self.swa.has if self.swa is not None else _always
        usable = self.mamba.has if self.mamba is not None else None
        best, depth = window_match(self.root_node, last, self.sliding_window, holds, usable)
        indices = torch.cat(values)[:depth] if values else torch.empty(0, dtype=torch.int64)
        return MatchResult(indices, best, best)

    def _touch(self, node: Any) -> None:
        super()._touch(node)
        if node is not self.root_node:
            for c in self.comps:
                c.lst.reset_node_and_parents_mru(node, self.root_node, c.has)

    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        for c in self.comps:
            c.split(new, child, split_len)

    def _list_insert_split(self, new: Any, child: Any) -> None:
        super()._list_insert_split(new, child)
        for c in self.comps:
            if c.has(new):
                c.lst.members[new.id] = new
                c.lst._link_after(child, new)

    # ------------------------------------------------------------------ insert
    def insert_with(
        self,
        key: RadixKey,
        value: torch.Tensor,
        state: torch.Tensor | None = None,
        swa_owned: torch.Tensor | None = None,
        swa_from: int = 0,
    ) -> tuple[int, bool]:
        """Insert; return (prefix_len, mamba_exist).

        ``state``: the Mamba state for the end of the key (still the caller's
        if ``mamba_exist``). ``swa_owned``/``swa_from``: as in
        ``SWARadixCache.insert_with_swa``. Duplicate KV is the caller's to free.
        """
        extra: dict[str, Any] = {"state": state, "swa_owned": swa_owned, "swa_from": swa_from}
        extra["mamba_exist"] = False
        prefix = self.insert(key, value, extra)
        return prefix, bool(extra["mamba_exist"])

    def insert(
        self, key: RadixKey, value: torch.Tensor, extra: dict[str, Any] | None = None
    ) -> int:
        extra = {} if extra is None else extra
        for comp, arg in ((self.mamba, "state"), (self.swa, "swa_owned")):
            if comp is not None and extra.get(arg) is None:
                raise ValueError(f"component {comp.name} needs {arg}: use insert_with")
        extra.setdefault("swa_from", 0)
        extra["offset"] = 0  # token position of the node the hooks see (next_segment)
        return super().insert(key, value, extra)

    def _on_insert_match(self, node: Any, extra: dict[str, Any]) -> None:
        super()._on_insert_match(node, extra)
        if self.swa is not None:
            tombstone = not self.swa.has(node)
            head = revival_split(extra, node, tombstone)
            if head:  # the tail is revived below, the head stays a tombstone
                self._split_node(node, head)
                extra["offset"] += head
            revive_or_free(extra, node, tombstone, self.swa.give, self.swa.pool)

    def _on_insert_end(self, node: Any, extra: dict[str, Any]) -> None:
        if self.mamba is not None and node is not self.root_node and not self.mamba.has(node):
            self.mamba.give(node, extra["state"])  # revives a mamba tombstone
        else:
            extra["mamba_exist"] = True

    def _add_leaf(self, parent: Any, key: RadixKey, value: torch.Tensor, extra: Any) -> Any:
        """A new leaf; the head whose SWA the caller freed out of window hangs above it
        as a tombstone of every component (it has a child: an internal node)."""
        dead = dead_head(extra, len(key)) if self.swa is not None else 0
        if dead:
            parent = super()._add_leaf(parent, key[:dead], value[:dead], {"tombstone": True})
            extra["offset"] += dead
            key, value = key[dead:], value[dead:]
        return super()._add_leaf(parent, key, value, extra)

    def _leaf_extra(self, leaf: Any, extra: dict[str, Any]) -> None:
        if extra.get("tombstone"):
            return
        if self.mamba is not None:
            self.mamba.give(leaf, extra["state"])
        if self.swa is not None:
            self.swa.give(leaf, leaf_segment(extra, len(leaf.key)))

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int, mamba_num: int = 0, swa_num: int = 0, **_: int) -> int:
        evicted = self.evict_full(num_tokens) if num_tokens > 0 else 0
        for comp, n in ((self.mamba, mamba_num), (self.swa, swa_num)):
            if comp is not None and n > 0:
                self.evict_component(comp, n)
        return evicted

    def evict_component(self, comp: Component, units: int) -> int:
        """Free ``units`` of one component LRU first: tombstone internal nodes, delete leaves."""
        evicted = 0
        x = comp.lst.lru_no_lock()
        while evicted < units and x is not None:
            x_next = comp.lst.prev_no_lock(x)
            evicted += comp.units(x)
            if x.children:
                comp.take(x)
            else:
                self._evict_leaf_node(x)
            if x_next is not None and not comp.lst.in_list(x_next):
                x_next = comp.lst.lru_no_lock()  # cascade-deleted: a tombstone of another kind
            x = x_next
        return evicted

    def _evict_leaf_node(self, x: Any) -> tuple[int, Any]:
        """Delete an unlocked leaf and the childless unlocked tombstones above it."""
        if x.lock_ref or not self._complete(x):
            raise AssertionError(f"cannot evict leaf {x.id}: locked or a tombstone")
        evicted = self._delete(x)
        while x.parent is not self.root_node and not x.parent.children:
            if self._complete(x.parent) or x.parent.lock_ref:
                break
            x = x.parent
            evicted += self._delete(x)
        return evicted, x

    def _delete(self, x: Any) -> int:
        for c in self.comps:
            if c.has(x):
                c.take(x)
        return self._evict_leaf(x)

    def _complete(self, node: Any) -> bool:
        return all(c.has(node) for c in self.comps)

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: Any) -> None:
        if node is not self.root_node:
            if self.mamba is not None:
                self.mamba.lock(node)
            if self.swa is not None:
                take_window_lock(node, self.root_node, self.sliding_window, self.swa.lock)
        super().inc_lock_ref(node)

    def dec_lock_ref(self, node: Any) -> None:
        if node is not self.root_node:
            if self.mamba is not None:
                self.mamba.unlock(node)
            if self.swa is not None:
                release_window_lock(node, self.root_node, self.swa.unlock)
        super().dec_lock_ref(node)
