"""HiRadixCache: a radix cache with a host-memory tier (SGLang's HiRadixCache).

The tier itself (write-through, demotion, load back, the asynchronous
controller and its acknowledgements) is shared with HiMambaRadixCache:
``HostBackup`` in ``refcache.host_backup`` and ``HostTier`` in
``refcache.host_tier``. Here: the node, the host LRU list of demoted nodes
that host eviction takes its leaves from, and the event round.

Incident 3 lives in ``HiRadixCache.check_hicache_events``: each round's two
count tensors are forwarded down the pipeline by ``PPSync.sync``; the fix
drains the previous round's sends at the start of the round, the regression
``hiradix-pp-sync-no-drain`` only reaps completed ones at the end.
"""

from __future__ import annotations

from typing import Any

import torch

from refcache.checks import check_links, check_list_members
from refcache.host_tier import HostTier
from refcache.keys import RadixKey, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode
from refcache.pools import HostPool, SlotAllocator
from refcache.pp_sync import PPSync
from refcache.radix import MatchResult

# HostTier used to be defined here; importing it from refcache.hiradix still works.
__all__ = ["HiRadixCache", "HostTier", "TreeNode"]

_EMPTY = torch.empty(0, dtype=torch.int64)


class TreeNode(BaseNode):
    def __init__(self) -> None:
        super().__init__()
        self.host_value: torch.Tensor | None = None
        self.loading = False
        self.host_prev: Any = None
        self.host_next: Any = None

    @property
    def backuped(self) -> bool:
        return self.host_value is not None


class HiRadixCache(HostTier):
    node_cls = TreeNode
    pp_regression = "hiradix-pp-sync-no-drain"

    def __init__(
        self,
        kv_pool: SlotAllocator,
        host_pool: HostPool,
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        write_through_threshold: int = 2,
        load_back_threshold: int = 2,
        latency_ticks: int = 2,
        device_kv: torch.Tensor | None = None,
        tp_group: Any = None,
        pp: PPSync | None = None,
        pp_payload: int = 1,
    ) -> None:
        thresholds = (write_through_threshold, load_back_threshold)
        self._init_host_tier(kv_pool, host_pool, *thresholds, device_kv, latency_ticks)
        super().__init__(kv_pool, page_size, inject)
        self.tp_group, self.pp, self.pp_payload = tp_group, pp, pp_payload

    def reset(self) -> None:
        super().reset()
        # Host-only nodes, in the order they were demoted: host eviction's candidates.
        self.host_lru_list = LRUList("host_prev", "host_next", "lock_ref", self._clears_pointers())

    # ------------------------------------------------------------------ events
    def check_hicache_events(self) -> None:
        """One event round: acknowledge finished writes and loads (two PP syncs)."""
        broken = self.pp_regression in self.inject
        if self.pp is not None and not broken:
            self.pp.drain_async_work()  # the fix: last round's sends, waited for and dropped
        self.cache_controller.tick()
        self.writing_check()
        self.loading_check()
        if self.pp is not None and broken:
            self.pp.reap_completed()  # never reaps on gloo: the list grows every round

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        key = key[: page_aligned(len(key), self.page_size)]
        values, last = self._match_helper(key)
        device = torch.cat(values) if values else _EMPTY
        host_node, host_len = self._host_tail(last, key[len(device) :])
        return MatchResult(device, last, host_node, host_len)

    # ------------------------------------------------------------------ eviction
    def evict(self, num_tokens: int, **_: int) -> int:
        return self._evict_device_tokens(num_tokens)

    def _evict_device_leaf(self, x: Any) -> int:
        if not x.backuped:
            return self._evict_leaf(x)  # nothing on the host: delete it from the tree
        n = self._demote(x)
        self.host_lru_list.insert_mru(x)
        return n

    def _on_unevict(self, node: Any) -> None:
        self.host_lru_list.remove_node(node)

    def _list_insert_split(self, new: Any, child: Any) -> None:
        if not child.evicted:
            super()._list_insert_split(new, child)
            return
        self.host_lru_list.members[new.id] = new
        self.host_lru_list._link_after(child, new)  # the parent sits just LRU-side of its child

    def evict_host(self, num_tokens: int) -> int:
        """Delete host-only leaves, least recently demoted first."""
        evicted = 0
        x = self.host_lru_list.leaf_lru_no_lock()
        while evicted < num_tokens and x is not None:
            x_next = self.host_lru_list.prev_leaf_no_lock(x)
            parent = x.parent
            evicted += self._free_host(x)
            self.host_lru_list.remove_node(x)
            self._delete_leaf(x)
            if parent.evicted and not parent.children:
                x_next = self.host_lru_list.leaf_lru_no_lock()  # the parent is a host leaf now
            x = x_next
        return evicted

    # ------------------------------------------------------------------ checks
    def _sanity_extra(self, outstanding_states: int) -> None:
        nodes = check_links(self)
        check_list_members(self.host_lru_list, [n for n in nodes if n.evicted], "host")
        self._check_host(nodes)
