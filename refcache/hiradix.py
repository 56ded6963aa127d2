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

With ``prefetch_ticks`` > 0 storage prefetch is asynchronous (``refcache.prefetch``).
SGLang #9874 lives in ``release_aborted_request``: under
``hiradix-abort-prefetch`` a waiting request's abort gives back nothing its
prefetch took (the host node's ref, the host slots, the ``ongoing_prefetch``
entry, its share of ``prefetch_tokens_occupied``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from refcache.checks import check_links, check_list_members
from refcache.host_backup import HostNode
from refcache.host_tier import HostListTier
from refcache.keys import RadixKey, child_key, page_aligned
from refcache.pools import HostPool, PoolAccount, SlotAllocator
from refcache.pp_sync import PPSync
from refcache.prefetch import POLICIES, PrefetchOperation, ready
from refcache.radix import MatchResult
from refcache.req import Req
from refcache.storage import StorageTier, page_hashes

__all__ = ["HiRadixCache", "TreeNode"]

_EMPTY = torch.empty(0, dtype=torch.int64)
ABORT_PREFETCH = "hiradix-abort-prefetch"


class TreeNode(HostNode):
    def __init__(self) -> None:
        super().__init__()
        self.host_ref_counter = 0  # prefetches in flight under this node (protect_host)

    @property
    def host_lock(self) -> int:
        """What keeps host eviction off this node: device locks and prefetches under it."""
        return self.lock_ref + self.host_ref_counter


class HiRadixCache(HostListTier):
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
        prefetch_ticks: int = 0,
        prefetch_policy: str = "wait_complete",
        prefetch_timeout: int = 8,
        prefetch_capacity: int = 0,
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
        if prefetch_policy not in POLICIES:
            raise ValueError(f"prefetch_policy must be one of {POLICIES}, got {prefetch_policy!r}")
        # 0: a prefetch completes at once, at admission; else over this many event rounds.
        self.prefetch_ticks, self.prefetch_policy = prefetch_ticks, prefetch_policy
        self.prefetch_timeout = prefetch_timeout  # rounds, for the "timeout" policy
        # SGLang's default limit: 80% of the host pool beyond the device pool's size.
        default = int(0.8 * (host_pool.size - kv_pool.size))
        self.prefetch_capacity = prefetch_capacity or max(default, host_pool.size // 4)
        self.ongoing_prefetch: dict[int, PrefetchOperation] = {}
        self.prefetch_tokens_occupied = 0
        self.rounds = 0

    # ------------------------------------------------------------------ events
    def check_hicache_events(self) -> None:
        """One event round: acknowledge finished writes and loads (two PP syncs)."""
        broken = self.pp_regression in self.inject
        if self.pp is not None and not broken:
            self.pp.drain_async_work()  # the fix: last round's sends, waited for and dropped
        self._drain_release()
        self.rounds += 1
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
        if self.storage is not None and not self.prefetch_ticks:
            self.prefetch_from_storage(key)
        return super()._match_for_request(key)

    # ------------------------------------------------------------------ async prefetch
    def match_waiting_req(self, req: Req) -> None:
        """Start the request's storage prefetch while it waits (asynchronous mode)."""
        if (self.storage is None or not self.prefetch_ticks or req.aux.get("prefetch_tried")
                or self.prefetch_rate_limited()):
            return
        req.aux["prefetch_tried"] = True  # once per request, as SGLang does at queue entry
        reserved = self._reserve_prefetch(req.key())
        if reserved is None:
            return
        last, new, host = reserved
        hashes = self._chain(last, new)
        stored = self.storage.hits(hashes) * self.page_size
        if stored < self.prefetch_threshold:
            self.host_release.append(host)  # nothing worth waiting for: revoked at once
            return
        last.host_ref_counter += 1  # protect_host
        self.ongoing_prefetch[req.rid] = PrefetchOperation(
            last, new, host, hashes, stored, self.rounds, self.page_size)
        self.prefetch_tokens_occupied += len(new)
        self.prefetches += 1

    def prefetch_rate_limited(self) -> bool:
        return self.prefetch_tokens_occupied >= self.prefetch_capacity

    def check_prefetch_progress(self, req: Req) -> bool:
        """Whether the request may be admitted; a finished or cut-short prefetch lands."""
        op = self.ongoing_prefetch.get(req.rid)
        if op is None:
            return True
        if not ready(op, self.prefetch_policy, self.rounds, self.prefetch_ticks,
                     self.prefetch_timeout):
            return False
        del self.ongoing_prefetch[req.rid]
        # terminate_prefetch: what has not arrived by now is dropped.
        self._land(op, op.completed_tokens(self.rounds, self.prefetch_ticks))
        return True

    def _land(self, op: PrefetchOperation, done: int) -> None:
        """The arrived pages become a host leaf under the prefetch's node; the rest go back."""
        self._release_prefetch(op)
        assert self.storage is not None
        done = min(done, self.storage.hits(op.hashes) * self.page_size)  # pages stored over
        free_slot = op.node.children.get(child_key(op.key, self.page_size)) is None
        if done < self.prefetch_threshold or not free_slot:
            self.host_release.append(op.host)  # nothing arrived, or another request got there
            return
        rows = self.storage.get(op.hashes[: done // self.page_size])
        self.host_pool.buffer[op.host[:done]] = rows
        self._add_host_leaf(op.node, op.key[:done], op.host[:done].clone())
        self.host_release.append(op.host[done:])
        self.prefetch_hits += 1

    def _release_prefetch(self, op: PrefetchOperation) -> None:
        op.node.host_ref_counter -= 1  # release_host
        self.prefetch_tokens_occupied -= len(op.key)

    def release_aborted_request(self, req: Req) -> None:
        """The request left the queue: its prefetch stops and gives everything back."""
        super().release_aborted_request(req)
        if ABORT_PREFETCH in self.inject:
            return  # SGLang #9874: the abort path never told the cache
        op = self.ongoing_prefetch.pop(req.rid, None)
        if op is not None:
            self._release_prefetch(op)
            self.host_release.append(op.host)

    def request_tables(self) -> dict[str, list[int]]:
        """Per-request tables: each must hold only requests still waiting or running."""
        return {"ongoing_prefetch": list(self.ongoing_prefetch)}

    def request_table_pools(self) -> dict[str, str]:
        """A prefetch entry holds host slots: a stale one's report names the host pool."""
        return {"ongoing_prefetch": "host"}

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
            return self._evict_regular(x)
        n = self._demote(x)
        self.host_lru_list.insert_mru(x)
        return n

    def _evict_regular(self, x: Any) -> int:
        """Nothing on the host: delete it from the tree (a leaf only, as SGLang asserts)."""
        assert len(x.children) == 0, f"non-leaf, {x.id=}"
        return self._evict_leaf(x)

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            "prefetches": self.prefetches,
            "prefetch_hits": self.prefetch_hits,
            "storage_pages": 0 if self.storage is None else len(self.storage),
            "prefetches_in_flight": len(self.ongoing_prefetch),
            "prefetch_tokens_occupied": self.prefetch_tokens_occupied,
        }

    def pool_accounting(self) -> dict[str, PoolAccount]:
        """Host slots of prefetches in flight are protected, held by copies in flight."""
        books = super().pool_accounting()
        held = sum(len(op.host) for op in self.ongoing_prefetch.values())
        if held:
            host = books["host"]
            books["host"] = dataclasses.replace(
                host, protected=host.protected + held, in_transfer=host.in_transfer + held)
        return books

    def locked_copies(self) -> dict[str, int]:
        """Host copies a ``protect_host`` still locks that no prefetch in flight took."""
        anchors = {id(op.node) for op in self.ongoing_prefetch.values()}
        return {"host": sum(len(n.host_value) for n in self.iter_nodes()
                            if n.host_ref_counter > 0 and n.host_value is not None
                            and id(n) not in anchors)}

    # ------------------------------------------------------------------ checks
    def _sanity_extra(self, outstanding_states: int) -> None:
        nodes = check_links(self)
        check_list_members(self.host_lru_list, [n for n in nodes if n.evicted], "host")
        self._check_host(nodes)
