"""UnifiedRadixCache: one tree, one LRU list per component (full, mamba, swa).

A node holds full KV slots (``value``) and, per extra component, its slots in
``comp_value[pt]`` (``None``: a tombstone of that component). Each component
has its own LRU list whose pointers are dict entries ``node.lru_prev[pt]`` /
``node.lru_next[pt]``, as in SGLang's unified tree. The full lock stays the
int ``lock_ref`` (the shared checks read it), the others are
``comp_lock_ref[pt]``. Per component the semantics are MambaRadixCache's (a
state at the end of a sequence, locked on the locked node only) and
SWARadixCache's (a slot per token, locked over the last window; the window
helpers come from swa.py). Leaves hold every component.

Incidents: ``unified-lru-unlink`` (1: the lists' ``_unlink`` leaves
``lru_prev[pt]``/``lru_next[pt]`` set, so a tombstoned parent's entry closes a
cycle with its deleted child) and ``unified-pp-sync-no-drain`` (3: PP sends
reaped non-blocking at the end of the round instead of drained at its start).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch

from refcache.checks import check_links, check_list_members, check_tree
from refcache.keys import RadixKey, page_aligned
from refcache.lru import LRUList, Sentinel
from refcache.node import BaseNode
from refcache.pools import SlotAllocator, StatePool
from refcache.pp_sync import PAYLOAD_DTYPE
from refcache.radix import MatchResult, RadixCache
from refcache.req import Req
from refcache.swa import lock_window, next_segment, own_swa, unlock_window, window_match

KINDS = ("full", "mamba", "swa")


class TreeNode(BaseNode):
    def __init__(self) -> None:
        super().__init__()
        self.lru_prev: dict[str, Any] = {}
        self.lru_next: dict[str, Any] = {}
        self.comp_value: dict[str, torch.Tensor | None] = {}
        self.comp_lock_ref: dict[str, int] = {}
        self.swa_uuid: int | None = None  # set on a node where some lock's window ends
        self.swa_lock_uuids: list[int | None] = []  # one per lock taken at this node


class PPSyncLike(Protocol):
    """What the cache uses of ``refcache.pp_sync.PPSync`` (tests pass a fake)."""

    work_list: list[Any]

    def sync(self, data: torch.Tensor) -> torch.Tensor: ...

    def drain_async_work(self) -> None: ...

    def reap_completed(self) -> None: ...


def _always(node: Any) -> bool:
    return True


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


class UnifiedRadixCache(RadixCache):
    node_cls = TreeNode
    regression = "unified-lru-unlink"
    pp_regression = "unified-pp-sync-no-drain"

    def __init__(
        self,
        kv_pool: SlotAllocator,
        components: Mapping[str, SlotAllocator],
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        pp: PPSyncLike | None = None,
        sliding_window: int | None = None,
        pp_payload: int = 1,
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
        self.pp, self.pp_payload = pp, pp_payload
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

    def _clears_pointers(self) -> bool:
        return self.regression not in self.inject

    def _states(self) -> StatePool:
        if self.mamba_pool is None:
            raise AssertionError("no mamba component")
        return self.mamba_pool

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
            slots, whole = next_segment(extra, len(node.key))
            if slots is not None and whole and not self.swa.has(node):
                self.swa.give(node, slots)  # revive: the window before the new tokens is whole
            elif slots is not None:
                self.swa.pool.free(slots)

    def _on_insert_end(self, node: Any, extra: dict[str, Any]) -> None:
        if self.mamba is not None and node is not self.root_node and not self.mamba.has(node):
            self.mamba.give(node, extra["state"])  # revives a mamba tombstone
        else:
            extra["mamba_exist"] = True

    def _leaf_extra(self, leaf: Any, extra: dict[str, Any]) -> None:
        if self.mamba is not None:
            self.mamba.give(leaf, extra["state"])
        if self.swa is not None:
            slots, whole = next_segment(extra, len(leaf.key))
            if slots is None or not whole:
                raise AssertionError("a new leaf cannot start inside the caller's cached prefix")
            self.swa.give(leaf, slots)

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int, mamba_num: int = 0, swa_num: int = 0, **_: int) -> int:
        evicted = self.evict_full(num_tokens) if num_tokens > 0 else 0
        for comp, n in ((self.mamba, mamba_num), (self.swa, swa_num)):
            if comp is not None and n > 0:
                self.evict_component(comp, n)
        return evicted

    def evict_full(self, num_tokens: int) -> int:
        evicted = 0
        x = self.full_lru_list.leaf_lru_no_lock()
        while evicted < num_tokens and x is not None:
            x_next = self.full_lru_list.prev_leaf_no_lock(x)
            delta, x = self._evict_leaf_node(x)
            evicted += delta
            if not x.parent.children:
                x_next = self.full_lru_list.leaf_lru_no_lock()  # the parent may be LRU now
            x = x_next
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
                uuid = lock_window(node, self.root_node, self.sliding_window, self.swa.lock)
                node.swa_lock_uuids.append(uuid)
        super().inc_lock_ref(node)

    def dec_lock_ref(self, node: Any) -> None:
        if node is not self.root_node:
            if self.mamba is not None:
                self.mamba.unlock(node)
            if self.swa is not None:
                if not node.swa_lock_uuids:
                    raise AssertionError(f"dec_lock_ref on node {node.id} that holds no lock")
                unlock_window(node, self.root_node, node.swa_lock_uuids.pop(), self.swa.unlock)
        super().dec_lock_ref(node)

    # ------------------------------------------------------------------ requests
    def _alloc_from(self, comp: Component, n: int) -> torch.Tensor | None:
        short = n - comp.pool.available_size()
        if short > 0:
            self.evict_component(comp, short)
        return comp.pool.alloc(n)

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        if self.mamba is not None:
            req.state_slot = self._alloc_from(self.mamba, 1)
            if req.state_slot is None:
                return False
            if match.last_device_node is not self.root_node:  # copy-on-write of the prefix state
                self._states().copy_from(match.last_device_node.comp_value["mamba"], req.state_slot)
        if self.swa is not None:
            slots = self._alloc_from(self.swa, len(req.token_ids) - len(match.device_indices))
            if slots is None:
                self._release_request_state(req)
                return False
            req.aux["swa_indices"] = slots
        return True

    def _release_request_state(self, req: Req) -> None:
        if req.state_slot is not None:
            self._states().free(req.state_slot)
            req.state_slot = None
        if self.swa is not None:
            self.swa.pool.free(own_swa(req))
        req.aux.pop("swa_indices", None)

    def extend_request(self, req: Req, tokens: list[int]) -> bool:
        if self.swa is None:
            return super().extend_request(req, tokens)
        slots = self._alloc_from(self.swa, len(tokens))
        if slots is None:
            return False
        if not super().extend_request(req, tokens):
            self.swa.pool.free(slots)
            return False
        req.aux["swa_indices"] = torch.cat((own_swa(req), slots))
        return True

    def _insert_req(self, req: Req, state: torch.Tensor | None) -> int:
        """Insert the request's page-aligned tokens, free what the tree already had."""
        length = page_aligned(len(req.kv_indices), self.page_size)
        own = own_swa(req)
        prefix, exist = self.insert_with(
            req.key(length), req.kv_indices[:length], state, own, req.prefix_len
        )
        if exist and state is not None:
            self._states().free(state)
        self.kv_pool.free(req.kv_indices[req.prefix_len : max(prefix, req.prefix_len)])
        req.aux["swa_indices"] = own[length - req.prefix_len :]  # the tree took the rest
        return length

    def cache_unfinished_req(self, req: Req) -> None:
        """Insert with a copy of the request's state (it keeps computing in its own)."""
        donated = None
        if self.mamba is not None and req.state_slot is not None:
            donated = self._alloc_from(self.mamba, 1)
            if donated is None:
                raise MemoryError("mamba pool exhausted by locked states")
            self._states().copy_from(req.state_slot, donated)
        length = self._insert_req(req, donated)
        match = self.match_prefix(req.key(length))
        if len(match.device_indices) != length:
            raise AssertionError(f"req {req.rid}: the tree cannot resume at {length}")
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(match.last_device_node)
        req.kv_indices = torch.cat((match.device_indices, req.kv_indices[length:]))
        req.prefix_len, req.last_node = length, match.last_device_node

    def cache_finished_req(self, req: Req) -> None:
        """The tree takes the request's own state slot (freed if it had one)."""
        state, req.state_slot = req.state_slot, None
        length = self._insert_req(req, state)
        self.kv_pool.free(req.kv_indices[length:])  # the unaligned tail is not cached
        self._release_request_state(req)
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    def held_by(self, req: Req) -> dict[str, int]:
        """Slots the request holds outside the tree, per pool."""
        held = {"kv": len(req.kv_indices) - req.prefix_len}
        if self.mamba is not None:
            held["mamba"] = int(req.state_slot is not None)
        if self.swa is not None:
            held["swa"] = len(own_swa(req))
        return held

    # ------------------------------------------------------------------ PP sync
    def check_hicache_events(self) -> None:
        """One event round: forward the write and load counts down the PP ranks.

        No host tier here, so the counts are zero; the round still runs every
        scheduler step, idle or not, as in SGLang (the incident grew even idle).
        """
        if self.pp is None:
            return
        no_drain = self.pp_regression in self.inject
        if not no_drain:
            self.pp.drain_async_work()  # the fix: bounds work_list, a lagging rank throttles us
        self.pp.sync(torch.zeros(self.pp_payload, dtype=PAYLOAD_DTYPE))  # writing_check
        self.pp.sync(torch.zeros(self.pp_payload, dtype=PAYLOAD_DTYPE))  # loading_check
        if no_drain:
            self.pp.reap_completed()  # incident 3: only completed sends (none on gloo)

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(super().stats())
        for c in self.comps:
            out[f"{c.name}_lru"] = len(c.lst)
            out[f"{c.name}_available"] = c.pool.available_size()
            out[f"{c.name}_evictable"], out[f"{c.name}_protected"] = c.evictable, c.protected
            out[f"{c.name}_tombstones"] = sum(1 for n in self.iter_nodes() if not c.has(n)) - 1
        if self.pp is not None:
            out["work_list"] = len(self.pp.work_list)
        return out

    def sanity_check(
        self,
        outstanding_kv: int = 0,
        outstanding_states: int = 0,
        held: Mapping[str, int] | None = None,
    ) -> None:
        """Tree, lists and pools agree. ``held``: per component, the slots running
        requests hold (checked per pool); without it ``outstanding_states`` is
        their sum over the components (what ``Churn.outstanding`` passes)."""
        check_tree(self, outstanding_kv)
        nodes = [n for n in check_links(self) if n is not self.root_node]
        for n in nodes:
            self._check_node(n)
        outside = {c.name: c.check(nodes) for c in self.comps}
        if held is not None and outside != {c.name: held.get(c.name, 0) for c in self.comps}:
            raise AssertionError(f"pools outside the tree: {outside}, requests hold {dict(held)}")
        if min(outside.values(), default=0) < 0:
            raise AssertionError(f"pools: fewer slots in use than the tree holds: {outside}")
        if held is None and sum(outside.values()) != outstanding_states:
            raise AssertionError(f"pools outside the tree: {outside} != {outstanding_states}")

    def _check_node(self, n: Any) -> None:
        if not n.children and not self._complete(n):
            raise AssertionError(f"leaf {n.id} is a tombstone")
        for c in self.comps:
            ref = lock_of(n, c.name)
            if not 0 <= ref <= n.lock_ref or (ref and not c.has(n)):
                raise AssertionError(f"node {n.id}: {c.name} lock {ref}, full lock {n.lock_ref}")
        slots = n.comp_value.get("swa")
        if slots is not None and len(slots) != len(n.value):
            raise AssertionError(f"node {n.id}: {len(slots)} SWA slots for {len(n.value)} tokens")
