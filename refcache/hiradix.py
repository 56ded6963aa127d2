"""HiRadixCache: a radix cache with a host-memory tier (SGLang's HiRadixCache).

``HostTier`` is what the hierarchical caches share (this one and
HiMambaRadixCache): hit counting on insert and write-through to a host pool at
``write_through_threshold`` hits, demotion of backed-up device leaves to the
host (the node stays, ``evicted``), load back, the asynchronous controller and
its acknowledgement checks, host accounting and its invariants.

Invariants of the tiers: the device-resident nodes form a subtree at the root
(an evicted node's children are evicted); backed-up nodes form one as well
(``write_backup`` skips a node whose parent is not backed up), so a node that
is not backed up never has host-only descendants and host eviction can work
bottom-up from leaves.

Incident 3 lives in ``HiRadixCache.check_hicache_events``: each round's two
count tensors are forwarded down the pipeline by ``PPSync.sync``; the fix
drains the previous round's sends at the start of the round, the regression
``hiradix-pp-sync-no-drain`` only reaps completed ones at the end.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any

import torch
import torch.distributed as dist

from refcache.checks import check_links, check_list_members
from refcache.controller import CacheController
from refcache.keys import RadixKey, child_key, match_length, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode, tick
from refcache.pools import HostPool, SlotAllocator
from refcache.pp_sync import PAYLOAD_DTYPE, PPSync
from refcache.radix import MatchResult, RadixCache
from refcache.req import Req

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


class HostTier(RadixCache, metaclass=ABCMeta):
    """The host tier shared by the hierarchical caches (not used on its own)."""

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

    @property
    def tp_world_size(self) -> int:
        return 1 if self.tp_group is None else dist.get_world_size(group=self.tp_group)

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

    def _match_for_request(self, key: RadixKey) -> MatchResult:
        """A new request loads its host hit back first and then starts from it."""
        match = self.match_prefix(key)
        if match.host_hit_length == 0:
            return match
        _loaded, last = self.init_load_back(match.last_host_node, match.host_hit_length)
        if last is not match.last_host_node:
            return match
        return MatchResult(self._path_values(last), last, last)

    def _path_values(self, node: Any) -> torch.Tensor:
        values = []
        while node is not self.root_node:
            values.append(node.value)
            node = node.parent
        return torch.cat(values[::-1]) if values else _EMPTY

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
        if node.parent is not self.root_node and not node.parent.backuped:
            return 0  # keep backups a subtree at the root
        n = len(node.value)
        self._lock_for_write(node)  # shields node from the host eviction below, then the copy
        host = self.host_pool.alloc(n)
        if host is None:
            self.evict_host(n)  # host eviction in the middle of an insert (incident 2's site)
            host = self.host_pool.alloc(n)
        if host is None:
            self._unlock_after_write(node)
            return 0
        node.host_value = host
        self.host_protected_size_ += n
        self.ongoing_write_through[node.id] = node
        self.cache_controller.write(node.value, host, node.id, self._backup_state(node))
        return n

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
        self._split_extra(new, child, split_len)
        new.children = {child_key(child.key, self.page_size): child}
        new.parent.children[child_key(new.key, self.page_size)] = new
        child.parent = new
        self.tree_nodes += 1
        self._list_insert_split(new, child)
        return new

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

    def _demote(self, x: Any) -> int:
        """Free a backed-up node's device KV; it stays in the tree, host-only."""
        n = len(x.value)
        self.kv_pool.free(x.value)
        self.full_evictable_size_ -= n
        self.full_lru_list.remove_node(x)
        x.value = None
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

    # ------------------------------------------------------------------ load back
    def load_back(self, node: Any) -> torch.Tensor | None:
        """Bring node's host-only prefix back to the device; its new slots, or None."""
        chain = []
        x = node
        while x.evicted:
            chain.append(x)
            x = x.parent
        chain.reverse()
        host = torch.cat([n.host_value for n in chain]) if chain else _EMPTY
        if not self._worth_loading(node, len(host)):
            return None
        self.inc_lock_ref(x)  # the device prefix must survive the eviction alloc may do
        prepared = self._alloc_for_load(node, len(host))
        self.dec_lock_ref(x)
        if prepared is None:
            return None
        device, state = prepared
        offset = 0
        for n in chain:
            self._unevict(n, device[offset : offset + len(n.host_value)])
            offset += len(n.host_value)
            n.loading = True
        node.loading = True  # also a state-only restore (HiMamba) has to be waited for
        self._commit_load(node, state)
        self.inc_lock_ref(node)  # held until loading_check sees the copy done
        self.ongoing_load_back[node.id] = (x, node)
        self.cache_controller.load(host, device, node.id, state)
        return device

    def _worth_loading(self, node: Any, tokens: int) -> bool:
        return tokens >= self.load_back_threshold

    def _alloc_for_load(
        self, node: Any, tokens: int
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None] | None:
        """hook: device slots for a load (and a state slot pair: host, device)."""
        device = self.alloc_tokens(tokens)
        return None if device is None else (device, None)

    def _commit_load(self, node: Any, state: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        """hook: attach what ``_alloc_for_load`` reserved beyond KV slots."""

    def _needs_load(self, node: Any) -> bool:
        return bool(node.evicted)

    def init_load_back(self, last_node: Any, host_hit_length: int) -> tuple[torch.Tensor, Any]:
        """Load back a host hit; else fall back to the nearest node usable as is."""
        if self._needs_load(last_node):
            loaded = self.load_back(last_node)
            if loaded is not None:
                return loaded, last_node
            while last_node is not self.root_node and self._needs_load(last_node):
                last_node = last_node.parent
        return _EMPTY, last_node

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        if match.last_device_node.loading:
            self.cache_controller.flush()  # the forward pass would wait for the load
        return super()._alloc_request_state(req, match)

    # ------------------------------------------------------------------ events
    def _sync_count(self, count: int) -> int:
        """Agree on a count across TP ranks (MIN) and forward it down the pipeline."""
        data = torch.zeros(self.pp_payload, dtype=PAYLOAD_DTYPE)
        data[0] = count
        if self.tp_world_size > 1:
            # Skipped at TP size 1, as here: a MIN over one rank is the identity.
            dist.all_reduce(data, op=dist.ReduceOp.MIN, group=self.tp_group)
        if self.pp is not None:
            data = self.pp.sync(data)
        return int(data[0])

    def writing_check(self) -> None:
        acks = self.cache_controller.ack_write_queue
        for _ in range(self._sync_count(len(acks))):
            node = self.ongoing_write_through.pop(acks.popleft())
            self._unlock_after_write(node)

    def loading_check(self) -> None:
        acks = self.cache_controller.ack_load_queue
        for _ in range(self._sync_count(len(acks))):
            ancestor, node = self.ongoing_load_back.pop(acks.popleft())
            node.loading = False
            x = node
            while x is not ancestor:  # the chain that was loaded (splits may have cut it)
                x.loading = False
                x = x.parent
            self.dec_lock_ref(node)

    # ------------------------------------------------------------------ introspection
    def host_evictable_size(self) -> int:
        return self.host_evictable_size_

    def host_protected_size(self) -> int:
        return self.host_protected_size_

    def stats(self) -> dict[str, float]:
        nodes = list(self.iter_nodes())
        return {
            **super().stats(),
            "work_list": 0 if self.pp is None else len(self.pp.work_list),
            "host_used": self.host_pool.used_size(),
            "host_available": self.host_pool.available_size(),
            "host_evictable": self.host_evictable_size_,
            "host_protected": self.host_protected_size_,
            "backed_up_nodes": sum(1 for n in nodes if n.backuped),
            "evicted_nodes": sum(1 for n in nodes if n.evicted),
            "writes_in_flight": len(self.ongoing_write_through),
            "loads_in_flight": len(self.ongoing_load_back),
            "copies_in_flight": self.cache_controller.in_flight(),
        }

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
