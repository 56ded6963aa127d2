"""UnifiedRadixCache: one tree, one LRU list per component (full, mamba, swa).

A node holds full KV slots (``value``) and, per extra component, its slots in
``comp_value[pt]`` (``None``: a tombstone of that component). Each component
has its own LRU list whose pointers are dict entries ``node.lru_prev[pt]`` /
``node.lru_next[pt]``, as in SGLang's unified tree. The components live in
``refcache.components``, the tree side (match, split, insert, evict, locks) in
``refcache.unified_tree``; this module adds requests, the PP event round and
the checks.

Incidents: ``unified-lru-unlink`` (1: the lists' ``_unlink`` leaves
``lru_prev[pt]``/``lru_next[pt]`` set, so a tombstoned parent's entry closes a
cycle with its deleted child) and ``unified-pp-sync-no-drain`` (3: PP sends
reaped non-blocking at the end of the round instead of drained at its start) and
``unified-eagle-frontier`` (14, SGLang #34870: with bigram keys, ``eagle``, the
SWA component's out-of-window frontier measured from the token count, so the
leaf the unfinished insert makes keeps less than a window of live SWA).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from refcache.checks import check_links, check_tree
from refcache.components import Component, lock_of
from refcache.keys import page_aligned
from refcache.node import BaseNode
from refcache.pools import PoolAccount, SlotAllocator, StatePool
from refcache.pp_sync import PAYLOAD_DTYPE, PPSyncLike
from refcache.radix import MatchResult
from refcache.req import Req
from refcache.swa_window import (
    drop_own_swa,
    keep_own_swa,
    own_swa,
    reject_swa,
    release_out_of_window,
    swa_frontier,
    swa_start,
)
from refcache.unified_tree import UnifiedTree

__all__ = ["TreeNode", "UnifiedRadixCache"]


class TreeNode(BaseNode):
    def __init__(self) -> None:
        super().__init__()
        self.lru_prev: dict[str, Any] = {}
        self.lru_next: dict[str, Any] = {}
        self.comp_value: dict[str, torch.Tensor | None] = {}
        self.comp_lock_ref: dict[str, int] = {}
        self.swa_uuid: int | None = None  # set on a node where some lock's window ends
        self.swa_lock_uuids: list[int | None] = []  # one per lock taken at this node


class UnifiedRadixCache(UnifiedTree):
    node_cls = TreeNode
    regression = "unified-lru-unlink"
    pp_regression = "unified-pp-sync-no-drain"
    FRONTIER_REGRESSION = "unified-eagle-frontier"

    def __init__(
        self,
        kv_pool: SlotAllocator,
        components: Mapping[str, SlotAllocator],
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        pp: PPSyncLike | None = None,
        sliding_window: int | None = None,
        pp_payload: int = 1,
        eagle: bool = False,
        free_out_of_window: bool = False,
    ) -> None:
        self.pp, self.pp_payload = pp, pp_payload
        # As SGLang's tree core: bigram keys only without a Mamba component.
        self.bigram_keys = eagle and "mamba" not in components
        self.free_out_of_window = free_out_of_window
        super().__init__(kv_pool, components, page_size, inject, sliding_window)

    def _states(self) -> StatePool:
        if self.mamba_pool is None:
            raise AssertionError("no mamba component")
        return self.mamba_pool

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

    def _unschedule_request_state(self, req: Req) -> None:
        self._release_request_state(req)  # KV did not fit: the state and SWA slots go back

    def _release_request_state(self, req: Req) -> None:
        if req.state_slot is not None:
            self._states().free(req.state_slot)
            req.state_slot = None
        slots = drop_own_swa(req)
        if self.swa is not None:
            self.swa.pool.free(slots)

    def _reject_request_state(self, req: Req, n: int) -> None:
        if self.swa is not None:
            reject_swa(req, n, self.swa.pool)

    # Takes no ``slots`` (KV slots allocated before, for overlap scheduling): with an SWA
    # component a decoded token needs an SWA slot too; the scheduler runs it without overlap.
    def extend_request(self, req: Req, tokens: list[int]) -> bool:  # type: ignore[override]
        if self.swa is None:
            return super().extend_request(req, tokens)
        slots = self._alloc_from(self.swa, len(tokens))
        return self._extend_with_swa(req, tokens, slots, self.swa.pool)

    def _insert_req(self, req: Req, state: torch.Tensor | None) -> int:
        """Insert the request's page-aligned tokens, free what the tree already had."""
        length = page_aligned(self.key_units(len(req.kv_indices)), self.page_size)
        own, start = own_swa(req), swa_start(req)
        prefix, exist = self.insert_with(
            self.request_key(req, length), req.kv_indices[:length], state, own, start
        )
        if exist and state is not None:
            self._states().free(state)
        self.kv_pool.free(req.kv_indices[req.prefix_len : max(prefix, req.prefix_len)])
        if self.swa is not None:  # the tree took the rest
            keep_own_swa(req, own[max(0, length - start) :], max(start, length))
        return length

    def cache_unfinished_req(self, req: Req) -> None:
        """Insert with a copy of the request's state (it keeps computing in its own)."""
        donated = None
        if self.mamba is not None and req.state_slot is not None:
            donated = self._alloc_from(self.mamba, 1)
            if donated is None:
                raise MemoryError("mamba pool exhausted by locked states")
            self._states().copy_from(req.state_slot, donated)
        if self.free_out_of_window and self.swa is not None:
            self._free_out_of_window(req)
        self._resume_at(req, self._insert_req(req, donated))

    def _free_out_of_window(self, req: Req) -> None:
        """Before the insert, free the SWA the request's tokens slid out of: SGLang's
        ``comp.free_out_of_window_slots(req, len(radix_key) - 1, ...)`` in
        ``UnifiedRadixCache``'s unfinished path (unified_radix_cache.py).

        Under ``unified-eagle-frontier`` (SGLang #34870) the frontier is measured
        from the token count, which a bigram key is one entry short of: at a page
        boundary the insert ends a page below where the frontier assumed, and the
        leaf keeps less than a window of live SWA."""
        if self.swa is None:
            return
        spans = (len(req.token_ids) if self.FRONTIER_REGRESSION in self.inject
                 else self.key_units(len(req.kv_indices)))
        frontier = swa_frontier(spans - 1, self.sliding_window, self.page_size)
        release_out_of_window(req, frontier, self.swa.pool)

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """The tree takes the request's own state slot (freed if it had one)."""
        if not is_insert:  # abort, failure, retraction: nothing is cached
            self.release_running_req(req)
            return
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

    def pool_accounting(self) -> dict[str, PoolAccount]:
        books = super().pool_accounting()
        for c in self.comps:
            books[c.name] = PoolAccount.of(c.pool, c.evictable, c.protected)
        return books

    def pool_allocators(self) -> dict[str, Any]:
        return {**super().pool_allocators(), **{c.name: c.pool for c in self.comps}}

    def held_slots(self) -> dict[str, torch.Tensor]:
        """The tree's slot ids per pool: full KV and each component's (its non-tombstones)."""
        held = super().held_slots()
        for c in self.comps:
            ids = [n.comp_value[c.name].reshape(-1) for n in self.iter_nodes()
                   if n is not self.root_node and c.has(n)]
            held[c.name] = torch.cat(ids) if ids else torch.empty(0, dtype=torch.int64)
        return held

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
        self._check_tiers(nodes)

    def _check_tiers(self, nodes: list[Any]) -> None:
        """hook: the host tier's checks (``refcache.unified_host``)."""

    def _check_node(self, n: Any) -> None:
        if not n.children and not self._complete(n) and not self._tombstone_leaf_allowed(n):
            raise AssertionError(f"leaf {n.id} is a tombstone")
        for c in self.comps:
            ref = lock_of(n, c.name)
            if not 0 <= ref <= n.lock_ref or (ref and not c.has(n)):
                raise AssertionError(f"node {n.id}: {c.name} lock {ref}, full lock {n.lock_ref}")
        slots = n.comp_value.get("swa")
        if slots is not None and len(slots) != len(n.value):
            raise AssertionError(f"node {n.id}: {len(slots)} SWA slots for {len(n.value)} tokens")

    def _tombstone_leaf_allowed(self, node: Any) -> bool:
        """hook: a leaf must hold every component (the host tier keeps some that do not)."""
        return False
