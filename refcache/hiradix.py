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
from refcache.keys import RadixKey, child_key, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode
from refcache.pools import HostPool, SlotAllocator
from refcache.pp_sync import PPSync
from refcache.radix import MatchResult
from refcache.storage import StorageTier, page_hashes

__all__ = ["HiRadixCache", "TreeNode"]

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
        storage: StorageTier | None = None,
        prefetch_threshold: int = 1,
    ) -> None:
        thresholds = (write_through_threshold, load_back_threshold)
        self._init_host_tier(kv_pool, host_pool, *thresholds, device_kv, latency_ticks)
        super().__init__(kv_pool, page_size, inject)
        self.tp_group, self.pp, self.pp_payload = tp_group, pp, pp_payload
        self.storage, self.prefetch_threshold = storage, max(prefetch_threshold, 1)
        # Host slots a prefetch gave back, freed at the next event round
        # (SGLang's host_mem_release_queue, drained by _drain_release).
        self.host_release: list[torch.Tensor] = []
        self.prefetches = self.prefetch_hits = 0

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
        self._drain_release()
        self.cache_controller.tick()
        self.writing_check()
        self.loading_check()
        if self.pp is not None and broken:
            self.pp.reap_completed()  # never reaps on gloo: the list grows every round

    # ------------------------------------------------------------------ storage tier
    def _unlock_after_write(self, node: Any) -> None:
        super()._unlock_after_write(node)
        if self.storage is not None and node.backuped:
            self._backup_to_storage(node)  # SGLang's write_backup_storage, once on the host

    def _backup_to_storage(self, node: Any) -> None:
        assert self.storage is not None
        hashes = self._chain(node.parent, node.key)
        if hashes:
            self.storage.put(hashes, self.host_pool.buffer[node.host_value])

    def _chain(self, node: Any, key: RadixKey) -> list[int]:
        """Hashes of the whole pages of ``key`` below ``node``, chained from the root
        (SGLang's ``hash_value``: a page is only found under the same prefix)."""
        path = self._path_tokens(node)
        chained = page_hashes([*path, *key.token_ids], self.page_size, hash(key.extra_key))
        return chained[len(path) // self.page_size :]

    def _path_tokens(self, node: Any) -> list[int]:
        keys = []
        while node is not self.root_node:
            keys.append(node.key.token_ids)
            node = node.parent
        return [t for key in reversed(keys) for t in key]

    def _match_for_request(self, key: RadixKey) -> MatchResult:
        if self.storage is not None:
            self.prefetch_from_storage(key)
        return super()._match_for_request(key)

    def prefetch_from_storage(self, key: RadixKey) -> int:
        """Bring the stored pages after a new request's device and host hit to the host.

        As SGLang's ``prefetch_from_storage`` with a storage that answers at
        once: host slots for every page-aligned new token (evicting host leaves
        if short), then the leading pages the storage has go into a new
        host-only node (a copy of their slots) and the rest of the slots are
        released, freed at the next event round; with too few pages stored the
        prefetch is revoked and all of them are released. Tokens prefetched.
        """
        reserved = self._reserve_prefetch(key)
        if reserved is None:
            return 0
        last, new, host = reserved
        self.prefetches += 1
        hashes = self._chain(last, new)
        assert self.storage is not None
        hit = self.storage.hits(hashes) * self.page_size
        if hit < self.prefetch_threshold:
            self.host_release.append(host)  # revoked
            return 0
        self.host_pool.buffer[host[:hit]] = self.storage.get(hashes[: hit // self.page_size])
        self._add_host_leaf(last, new[:hit], host[:hit].clone())
        self.host_release.append(host[hit:])
        self.prefetch_hits += 1
        return hit

    def _reserve_prefetch(self, key: RadixKey) -> tuple[Any, RadixKey, torch.Tensor] | None:
        """The node a prefetch hangs under, its new tokens and their host slots."""
        for attempt in range(2):
            match = self.match_prefix(key)
            last = match.last_host_node
            if last is not self.root_node and not last.backuped:
                return None  # backed-up nodes form a subtree at the root
            new = key[len(match.device_indices) + match.host_hit_length :]
            new = new[: page_aligned(len(new), self.page_size)]
            if len(new) < self.prefetch_threshold:
                return None
            host = self.host_pool.alloc(len(new))
            if host is not None:
                return last, new, host
            if attempt == 0:
                self.evict_host(len(new))  # may delete nodes on the path: match again
        return None

    def _add_host_leaf(self, parent: Any, key: RadixKey, host_value: torch.Tensor) -> Any:
        """A host-only leaf of prefetched pages (SGLang's ``_insert_helper_host``)."""
        leaf = self._new_node()
        leaf.parent, leaf.key, leaf.host_value = parent, key, host_value
        parent.children[child_key(key, self.page_size)] = leaf
        self.tree_nodes += 1
        self.host_evictable_size_ += len(host_value)
        self.host_lru_list.insert_mru(leaf)
        return leaf

    def _drain_release(self) -> None:
        if self.host_release:
            self.host_pool.free(torch.cat(self.host_release))
            self.host_release = []

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

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            "prefetches": self.prefetches,
            "prefetch_hits": self.prefetch_hits,
            "storage_pages": 0 if self.storage is None else len(self.storage),
        }

    # ------------------------------------------------------------------ checks
    def _sanity_extra(self, outstanding_states: int) -> None:
        nodes = check_links(self)
        check_list_members(self.host_lru_list, [n for n in nodes if n.evicted], "host")
        self._check_host(nodes)
