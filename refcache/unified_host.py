"""HiUnifiedRadixCache: the Unified cache with a host tier (SGLang's UnifiedRadixCache + HiCache).

SGLang 0.5.17 and 0.5.23 build the host tier into ``UnifiedRadixCache``
(``init_hicache``): write-through of a node's KV and per-component state once
it is hit often enough, demotion of backed-up device leaves to the host, load
back of a host hit before a request starts, and the event round that
acknowledges finished copies. Here the tier is ``HostTier``'s
(``refcache.host_backup``, ``refcache.host_tier``) over the unified tree and
its components (``refcache.unified``), for FULL and FULL+MAMBA: a node's Mamba
state is backed up with its KV (``comp_host_value["mamba"]``, LRU list
``mamba_host_list``) and restored with it.

Load back follows SGLang's structure (``load_back``: lock the path, let each
component prepare, run the transfers, let each component finalize). The Mamba
component's prepare gives the request the device slot its state will be
copied into (SGLang's per-request copy-on-write slot, ``req.mamba_pool_idx``)
before the load is known to go through; a load that is called off (no room
for the KV or the node's state) must give it back. SGLang #30986 (fixed in
v0.5.17) lives in ``finalize_load_back``: under
``unified-loadback-abort-mamba`` nothing unwinds the prepared slot. In SGLang
the request then kept it until it ended and decoded from a state the copy
never wrote; here the request's admission forks its state from the node it
really starts at into a slot of its own (``_alloc_request_state``), so the
prepared slot is lost: the Mamba pool's idle books come up short.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import torch

from refcache import unified
from refcache.checks import check_list_members
from refcache.components import lock_of
from refcache.host_backup import HostNode, alloc_host_state
from refcache.host_tier import HostListTier
from refcache.keys import RadixKey
from refcache.lru import LRUList
from refcache.pools import HostPool, PoolAccount, SlotAllocator, StatePool
from refcache.radix import MatchResult, RadixCache
from refcache.req import Req
from refcache.unified import UnifiedRadixCache

__all__ = ["HiUnifiedRadixCache", "TreeNode"]

LOADBACK_ABORT = "unified-loadback-abort-mamba"
LOADED_FOR = "load_back_node"  # req.aux: the node a prepared state slot was loaded for
_EMPTY = torch.empty(0, dtype=torch.int64)


class TreeNode(unified.TreeNode, HostNode):
    def __init__(self) -> None:
        super().__init__()
        self.comp_host_value: dict[str, torch.Tensor | None] = {}
        self.host_mamba_prev: Any = None
        self.host_mamba_next: Any = None

    @property
    def host_lock(self) -> int:
        return self.lock_ref


# Both bases declare ``pp`` (PPSync, PPSyncLike); the host tier here runs without PP.
class HiUnifiedRadixCache(HostListTier, UnifiedRadixCache):  # type: ignore[misc]
    node_cls = TreeNode

    def __init__(
        self,
        kv_pool: SlotAllocator,
        components: Mapping[str, SlotAllocator],
        host_pool: HostPool,
        mamba_host_pool: StatePool | None = None,
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        write_through_threshold: int = 2,
        load_back_threshold: int = 2,
        latency_ticks: int = 2,
        device_kv: torch.Tensor | None = None,
    ) -> None:
        if "swa" in components:
            raise ValueError("the unified host tier is modelled for FULL and FULL+MAMBA only")
        mamba_pool = components.get("mamba")
        if (mamba_pool is None) != (mamba_host_pool is None):
            raise ValueError("a mamba component needs a mamba_host_pool, and only it")
        self.mamba_host_pool = mamba_host_pool
        self._write_state_locks: set[int] = set()  # writes that also locked the node's state
        self._admitting: Req | None = None  # the request whose admission loads back
        self.load_backs_called_off = 0
        states: dict[str, Any] = {}
        if isinstance(mamba_pool, StatePool):
            states = {"device_states": mamba_pool, "host_states": mamba_host_pool}
        thresholds = (write_through_threshold, load_back_threshold)
        self._init_host_tier(kv_pool, host_pool, *thresholds, device_kv, latency_ticks, **states)
        UnifiedRadixCache.__init__(self, kv_pool, components, page_size, inject)

    def reset(self) -> None:
        super().reset()
        self.mamba_host_list = LRUList(
            "host_mamba_prev", "host_mamba_next", "lock_ref", self._clears_pointers())

    def check_hicache_events(self) -> None:
        """One event round: acknowledge finished writes and loads."""
        self.cache_controller.tick()
        self.writing_check()
        self.loading_check()

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Device match up to the deepest device state; the host hit reaches the
        deepest node with a state on either tier (loading it restores the state)."""
        return self._state_match(key, self._device_usable, self._resumable)

    def _device_usable(self, node: Any) -> bool:
        return self.mamba is None or self.mamba.has(node)

    def _resumable(self, node: Any) -> bool:
        return self._device_usable(node) or self._host_state(node) is not None

    @staticmethod
    def _host_state(node: Any) -> torch.Tensor | None:
        state: torch.Tensor | None = node.comp_host_value.get("mamba")
        return state

    # ------------------------------------------------------------------ load back
    def alloc_request(self, req: Req) -> bool:
        """Admission; a load back it starts prepares per-request state for ``req``
        (SGLang passes the request in ``InitLoadBackParams``)."""
        self._admitting = req
        try:
            return super().alloc_request(req)
        finally:
            self._admitting = None

    def _needs_load(self, node: Any) -> bool:
        state_on_host_only = self.mamba is not None and not self.mamba.has(node)
        return bool(node.evicted or (state_on_host_only and self._host_state(node) is not None))

    def _worth_loading(self, node: Any, tokens: int) -> bool:
        if self.mamba is not None:
            return self._host_state(node) is not None  # without the state the KV is no use
        return tokens >= self.load_back_threshold

    def load_back(self, node: Any) -> torch.Tensor | None:
        """SGLang's ``load_back``: lock the device path, let the components prepare,
        run the transfers, let the components finalize (and recover on an abort)."""
        chain, ancestor = self._host_chain(node)
        RadixCache.inc_lock_ref(self, ancestor)  # the device prefix survives the evictions below
        req = self._admitting
        prepared = self.prepare_load_back(node, req)
        device = None
        try:
            device = self._load_back_transfers(node, chain, ancestor)
        finally:
            self.load_backs_called_off += device is None
            self.finalize_load_back(req, prepared, device is not None)
            RadixCache.dec_lock_ref(self, ancestor)
        return device

    def _host_chain(self, node: Any) -> tuple[list[Any], Any]:
        """The host-only nodes from the device path down to ``node``, and their device parent."""
        chain = []
        while node.evicted:
            chain.append(node)
            node = node.parent
        return chain[::-1], node

    def prepare_load_back(self, node: Any, req: Req | None) -> torch.Tensor | None:
        """The Mamba component's prepare: the request's own device slot for the state
        the load brings back, published on the request before the load is known to
        go through (SGLang allocates ``req.mamba_pool_idx`` here)."""
        if req is None or self.mamba is None or req.state_slot is not None:
            return None
        if self.mamba.has(node) or self._host_state(node) is None:
            return None
        if self.mamba.pool.available_size() < 1:
            self.evict_component(self.mamba, 1)
        slot = self.mamba.pool.alloc(1)
        if slot is not None:
            req.state_slot, req.aux[LOADED_FOR] = slot, node
        return slot

    def finalize_load_back(self, req: Req | None, prepared: torch.Tensor | None,
                           success: bool) -> None:
        """A called-off load gives back the slot its prepare published (SGLang #30986)."""
        if success or req is None or prepared is None:
            return
        if LOADBACK_ABORT in self.inject:
            return  # before #30986: the request keeps a slot no copy will fill
        self._free_state(prepared)
        req.state_slot = None
        req.aux.pop(LOADED_FOR, None)

    def _load_back_transfers(self, node: Any, chain: list[Any],
                             ancestor: Any) -> torch.Tensor | None:
        """Room for the KV and the node's state, then the copy; None when called off."""
        host = torch.cat([n.host_value for n in chain]) if chain else _EMPTY
        if not self._worth_loading(node, len(host)):
            return None
        state = None
        if self.mamba is not None:
            state = self._alloc_from(self.mamba, 1)  # the node's own restored state
            if state is None:
                return None
        device = self.alloc_tokens(len(host))
        if device is None:  # eviction could not make room: the load is called off
            if state is not None:
                self._free_state(state)
            return None
        self._commit_load_back(node, chain, device, state)
        self.ongoing_load_back[node.id] = (ancestor, node)
        self.kv_tokens_loaded_back += len(host)
        host_state = self._host_state(node)
        pair = None if state is None or host_state is None else (host_state, state)
        self.cache_controller.load(host, device, node.id, pair)
        return device

    def _free_state(self, slots: torch.Tensor) -> None:
        assert self.mamba is not None
        self.mamba.pool.free(slots)

    def _commit_load_back(self, node: Any, chain: list[Any], device: torch.Tensor,
                          state: torch.Tensor | None) -> None:
        """The loaded nodes are on the device again, locked until the copy is acknowledged."""
        offset = 0
        for n in chain:
            self._unevict(n, device[offset : offset + len(n.host_value)])
            offset += len(n.host_value)
            n.loading = True
        node.loading = True  # also a state-only restore has to be waited for
        if state is not None:
            assert self.mamba is not None
            self.mamba.give(node, state)
        self.inc_lock_ref(node)  # held until loading_check sees the copy done

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        """A slot its load back prepared serves the request that starts at that node
        (the loaded state is forked into it once the copy landed); otherwise the
        request's state is forked afresh from the node it starts at."""
        loaded_for = req.aux.pop(LOADED_FOR, None)
        node = match.last_device_node
        if req.state_slot is None or loaded_for is not node:
            return super()._alloc_request_state(req, match)
        self.cache_controller.flush()  # the forward pass would wait for the load
        self._states().copy_from(node.comp_value["mamba"], req.state_slot)
        return True

    # ------------------------------------------------------------------ write-through
    def _lock_for_write(self, node: Any) -> None:
        """Pin the KV path; the state too when the node has one (a tombstone has none)."""
        RadixCache.inc_lock_ref(self, node)
        if self.mamba is not None and self.mamba.has(node):
            self.mamba.lock(node)
            self._write_state_locks.add(node.id)

    def _unlock_after_write(self, node: Any) -> None:
        if node.id in self._write_state_locks:
            assert self.mamba is not None
            self._write_state_locks.discard(node.id)
            self.mamba.unlock(node)
        RadixCache.dec_lock_ref(self, node)

    def _backup_state(self, node: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.mamba is None or self.mamba_host_pool is None or not self.mamba.has(node):
            return None
        slot = alloc_host_state(self.mamba_host_pool, self.evict_mamba_host)
        if slot is None:
            return None  # back up the KV alone
        node.comp_host_value["mamba"] = slot
        self.mamba_host_list.insert_mru(node)
        return node.comp_value["mamba"], slot

    def evict_mamba_host(self, num: int) -> int:
        """Drop host states LRU first, keeping the nodes; host leaves keep theirs."""
        x, dropped = self.mamba_host_list.lru_no_lock(), 0
        while dropped < num and x is not None:
            x_next = self.mamba_host_list.prev_no_lock(x)
            if not (x.evicted and not x.children):
                self._free_host_state(x)
                dropped += 1
            x = x_next
        return dropped

    def _free_host_state(self, node: Any) -> None:
        assert self.mamba_host_pool is not None
        self.mamba_host_list.remove_node(node)
        self.mamba_host_pool.free(node.comp_host_value["mamba"])
        node.comp_host_value["mamba"] = None

    # ------------------------------------------------------------------ split
    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        super()._split_extra(new, child, split_len)
        new.comp_host_value["mamba"] = None  # a state belongs to the end of its sequence

    # ------------------------------------------------------------------ device eviction
    def evict_full(self, num_tokens: int) -> int:
        return self._evict_device_tokens(num_tokens)

    def _evict_leaf_node(self, x: Any) -> tuple[int, Any]:
        """The Mamba list's childless node: demoted or deleted, or only its state given
        up while a copy pins its KV (a tombstone revived under a write in flight)."""
        if x.lock_ref > 0:
            assert self.mamba is not None
            self.mamba.take(x)
            return 0, x
        return self._evict_device_leaf(x), x

    def _evict_device_leaf(self, x: Any) -> int:
        if not x.backuped:
            return self._delete_device_branch(x)
        if self.mamba is not None and self.mamba.has(x):
            self.mamba.take(x)
        n = self._demote(x)
        self.host_lru_list.insert_mru(x)
        return n

    def _delete_device_branch(self, x: Any) -> int:
        """Delete a device leaf that has no host copy, then the tombstones it leaves."""
        parent = x.parent
        return self._delete(x) + self._prune_device_tombstones(parent)

    def _prune_device_tombstones(self, node: Any) -> int:
        """Delete childless, unlocked device tombstones upwards; KV tokens freed."""
        freed = 0
        while (node is not self.root_node and not node.evicted and not node.children
               and not node.lock_ref and not self._complete(node)):
            parent = node.parent
            freed += self._delete(node)
            node = parent
        return freed

    def _delete(self, x: Any) -> int:
        if x.backuped:
            self._drop_host_copy(x)
        return super()._delete(x)

    def _drop_host_copy(self, x: Any) -> int:
        n = self._free_host(x)
        if self._host_state(x) is not None:
            self._free_host_state(x)
        return n

    # ------------------------------------------------------------------ host eviction
    def _free_host_leaf(self, x: Any) -> int:
        return self._drop_host_copy(x)

    def _after_host_leaf(self, parent: Any) -> None:
        self._prune_device_tombstones(parent)  # a device tombstone must not be left a leaf

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        out = super().stats()
        out["load_backs_called_off"] = self.load_backs_called_off
        if self.mamba_host_pool is not None:
            out["mamba_host_used"] = self.mamba_host_pool.used_size()
            out["mamba_host_lru"] = len(self.mamba_host_list)
        return out

    def pool_accounting(self) -> dict[str, PoolAccount]:
        books = super().pool_accounting()
        if self.mamba is not None and self.mamba_host_pool is not None:
            mamba = books["mamba"]
            books["mamba"] = PoolAccount(mamba.size, mamba.available, mamba.evictable,
                                         mamba.protected, self._states_in_transfer())
            books["mamba_host"] = PoolAccount.of(self.mamba_host_pool, len(self.mamba_host_list), 0)
        return books

    def _states_in_transfer(self) -> int:
        """Device states locked by copies in flight and by nothing else."""
        holds: Counter[int] = Counter()
        nodes: dict[int, Any] = {}
        for node in self.ongoing_write_through.values():
            if node.id in self._write_state_locks:
                holds[node.id] += 1
                nodes[node.id] = node
        for _, node in self.ongoing_load_back.values():
            holds[node.id] += 1
            nodes[node.id] = node
        return sum(1 for i, n in nodes.items() if lock_of(n, "mamba") <= holds[i])

    def _tombstone_leaf_allowed(self, node: Any) -> bool:
        """Host-only leaves keep no device state; a backed-up device node may be left a
        childless tombstone when host eviction deletes its host-only children while a
        copy pins it. Device eviction takes it like any leaf."""
        return bool(node.evicted or node.backuped)

    def _check_tiers(self, nodes: list[Any]) -> None:
        """Host accounting and lists, and the host states, agree with the tree."""
        check_list_members(self.host_lru_list, [n for n in nodes if n.evicted], "host")
        self._check_host(nodes)
        if any(n.evicted and self._device_state(n) for n in nodes):
            raise AssertionError("a host-only node holds a device state")
        hosted = [n for n in nodes if self._host_state(n) is not None]
        check_list_members(self.mamba_host_list, hosted, "mamba host")
        if self.mamba_host_pool is not None and self.mamba_host_pool.used_size() != len(hosted):
            raise AssertionError("mamba host pool disagrees with the tree's host states")

    def _device_state(self, node: Any) -> bool:
        return self.mamba is not None and self.mamba.has(node)
