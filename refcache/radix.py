"""RadixCache: the plain prefix cache, and the tree machinery the others reuse.

Structure follows SGLang's ``RadixCache``: nodes hold a key (a run of tokens)
and a value (the KV slot ids of those tokens); children are keyed by
``child_key``; ``match_prefix`` splits a node when a match ends inside it;
eviction takes unlocked leaves from the LRU end; locks run from a node to the
root. Subclasses add per-component state through the hooks marked ``hook``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from refcache.checks import check_tree
from refcache.keys import RadixKey, child_key, match_length, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode, tick
from refcache.pools import SlotAllocator
from refcache.regressions import validate
from refcache.req import Req


class TreeNode(BaseNode):
    pass


@dataclass
class MatchResult:
    device_indices: torch.Tensor
    last_device_node: Any
    last_host_node: Any
    host_hit_length: int = 0


class RadixCache:
    node_cls: type[BaseNode] = TreeNode

    def __init__(
        self, kv_pool: SlotAllocator, page_size: int = 1, inject: tuple[str, ...] = ()
    ) -> None:
        self.kv_pool = kv_pool
        self.page_size = page_size
        self.inject = validate(inject)
        self._nodes: weakref.WeakSet[BaseNode] = weakref.WeakSet()
        self.tree_nodes = 0
        self.reset()

    # ------------------------------------------------------------------ setup
    def reset(self) -> None:
        self.root_node = self._new_node()
        self.root_node.value = torch.empty(0, dtype=torch.int64)
        self.root_node.lock_ref = 1
        self.tree_nodes = 1
        self.full_evictable_size_ = 0
        self.full_protected_size_ = 0
        self.full_lru_list = self._make_full_lru_list()

    def _make_full_lru_list(self) -> LRUList:
        """hook: build the full list (the Unified cache's reads dict pointers)."""
        return LRUList("prev", "next", "lock_ref", self._clears_pointers())

    def _clears_pointers(self) -> bool:
        """hook: whether LRU removal clears pointers (False under ``*-lru-unlink``)."""
        return True

    def _new_node(self) -> Any:
        node = self.node_cls()
        self._nodes.add(node)
        return node

    def close(self) -> None:
        """Release external resources (process groups, threads); none here."""

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        key = key[: page_aligned(len(key), self.page_size)]
        values, last = self._match_helper(key)
        indices = torch.cat(values) if values else torch.empty(0, dtype=torch.int64)
        return MatchResult(indices, last, last)

    def _match_helper(self, key: RadixKey) -> tuple[list[torch.Tensor], Any]:
        node, values = self.root_node, []
        node.last_access_time = tick()
        while len(key) > 0:
            child = node.children.get(child_key(key, self.page_size))
            if child is None or not self._matchable(child):
                break
            n = match_length(child.key, key, self.page_size)
            if n == 0:
                break
            if n < len(child.key):
                child = self._split_node(child, n)
            child.last_access_time = tick()
            values.append(child.value)
            node, key = child, key[n:]
        self._touch(node)
        return values, node

    def _matchable(self, node: Any) -> bool:
        """hook: whether a match may descend into this node (HiCache: not evicted)."""
        return True

    def _touch(self, node: Any) -> None:
        """hook: record an access of node and its ancestors in the LRU lists."""
        if node is not self.root_node:
            self.full_lru_list.reset_node_and_parents_mru(node, self.root_node)

    # ------------------------------------------------------------------ split
    def _split_node(self, child: Any, split_len: int) -> Any:
        """Cut ``child`` after ``split_len`` tokens; return the new upper node."""
        new = self._new_node()
        new.parent = child.parent
        new.key = child.key[:split_len]
        new.value = child.value[:split_len].clone()
        new.lock_ref = child.lock_ref
        new.last_access_time = child.last_access_time
        new.hit_count = child.hit_count
        child.key = child.key[split_len:]
        child.value = child.value[split_len:].clone()
        self._split_extra(new, child, split_len)
        new.children = {child_key(child.key, self.page_size): child}
        new.parent.children[child_key(new.key, self.page_size)] = new
        child.parent = new
        self.tree_nodes += 1
        self._list_insert_split(new, child)
        return new

    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        """hook: divide per-component state between the two halves of a split."""

    def _list_insert_split(self, new: Any, child: Any) -> None:
        """hook: put the new upper node into the lists, just behind its child."""
        self.full_lru_list.members[new.id] = new
        self.full_lru_list._link_after(child, new)

    # ------------------------------------------------------------------ insert
    def insert(
        self, key: RadixKey, value: torch.Tensor, extra: dict[str, Any] | None = None
    ) -> int:
        """Insert key -> value; return how many leading tokens were already cached.

        ``extra`` carries per-component inputs and outputs (a Mamba state in,
        ``mamba_exist`` out) through the hooks.
        """
        extra = {} if extra is None else extra
        key = key[: page_aligned(len(key), self.page_size)]
        value = value[: len(key)]
        node, prefix_len = self.root_node, 0
        node.last_access_time = tick()
        while len(key) > 0:
            child = node.children.get(child_key(key, self.page_size))
            if child is None:
                break
            n = match_length(child.key, key, self.page_size)
            if n < len(child.key):
                child = self._split_node(child, n)
            self._on_insert_match(child, extra)
            prefix_len += n
            node, key, value = child, key[n:], value[n:]
        if len(key) > 0:
            node = self._add_leaf(node, key, value, extra)
        else:
            self._on_insert_end(node, extra)
        self._touch(node)
        return prefix_len

    def _on_insert_match(self, node: Any, extra: dict[str, Any]) -> None:
        """hook: a node on the insert path matched (HiCache counts hits here)."""
        node.last_access_time = tick()

    def _on_insert_end(self, node: Any, extra: dict[str, Any]) -> None:
        """hook: the insert ended exactly at an existing node."""

    def _add_leaf(self, parent: Any, key: RadixKey, value: torch.Tensor, extra: Any) -> Any:
        leaf = self._new_node()
        leaf.parent, leaf.key, leaf.value = parent, key, value.clone()
        parent.children[child_key(key, self.page_size)] = leaf
        self.tree_nodes += 1
        self.full_evictable_size_ += len(value)
        self.full_lru_list.insert_mru(leaf)
        self._leaf_extra(leaf, extra)
        return leaf

    def _leaf_extra(self, leaf: Any, extra: dict[str, Any]) -> None:
        """hook: attach per-component state to a new leaf."""

    # ------------------------------------------------------------------ delete
    def _delete_leaf(self, node: Any) -> None:
        """Unhook a leaf from its parent. As in SGLang, ``node.parent`` is left set."""
        key = child_key(node.key, self.page_size)
        if node.parent.children.get(key) is not node:
            raise AssertionError("parent does not have child key")
        del node.parent.children[key]
        self.tree_nodes -= 1

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int, **_: int) -> int:
        """Evict at least ``num_tokens`` KV tokens from unlocked leaves, LRU first."""
        evicted = 0
        x = self.full_lru_list.leaf_lru_no_lock()
        while evicted < num_tokens and x is not None:
            x_next = self.full_lru_list.prev_leaf_no_lock(x)
            parent = x.parent
            evicted += self._evict_leaf(x)
            if not parent.children and parent is not self.root_node:
                x_next = self.full_lru_list.leaf_lru_no_lock()  # the parent became a leaf
            x = x_next
        return evicted

    def _evict_leaf(self, x: Any) -> int:
        self.kv_pool.free(x.value)
        self.full_evictable_size_ -= len(x.value)
        self.full_lru_list.remove_node(x)
        self._delete_leaf(x)
        return len(x.value)

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: Any) -> None:
        while node is not self.root_node:
            if node.lock_ref == 0:
                self.full_evictable_size_ -= len(node.value)
                self.full_protected_size_ += len(node.value)
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, node: Any) -> None:
        while node is not self.root_node:
            if node.lock_ref == 1:
                self.full_evictable_size_ += len(node.value)
                self.full_protected_size_ -= len(node.value)
            if node.lock_ref <= 0:
                raise AssertionError(f"lock_ref of node {node.id} would go negative")
            node.lock_ref -= 1
            node = node.parent

    def full_evictable_size(self) -> int:
        return self.full_evictable_size_

    def full_protected_size(self) -> int:
        return self.full_protected_size_

    # ------------------------------------------------------------------ requests
    def alloc_tokens(self, n: int) -> torch.Tensor | None:
        """n KV slots, evicting unlocked leaves first if the pool is short."""
        short = n - self.kv_pool.available_size()
        if short > 0:
            self.evict(short)
        return self.kv_pool.alloc(n)

    def alloc_request(self, req: Req) -> bool:
        """Match the request's prefix, lock it and allocate the rest; False if full."""
        match = self._match_for_request(req.key())
        self.inc_lock_ref(match.last_device_node)
        slots = self.alloc_tokens(len(req.token_ids) - len(match.device_indices))
        if slots is None or not self._alloc_request_state(req, match):
            if slots is not None:
                self.kv_pool.free(slots)
            self.dec_lock_ref(match.last_device_node)
            return False
        req.kv_indices = torch.cat((match.device_indices, slots))
        req.prefix_len = len(match.device_indices)
        req.last_node = match.last_device_node
        return True

    def _match_for_request(self, key: RadixKey) -> MatchResult:
        """hook: the match a new request starts from (HiCache loads host hits back)."""
        return self.match_prefix(key)

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        """hook: allocate per-request state beyond KV slots (Mamba: a state slot)."""
        return True

    def extend_request(self, req: Req, tokens: list[int]) -> bool:
        """Decode: allocate slots for new tokens; False when the pool is full."""
        slots = self.alloc_tokens(len(tokens))
        if slots is None:
            return False
        req.token_ids.extend(tokens)
        req.kv_indices = torch.cat((req.kv_indices, slots))
        return True

    def cache_unfinished_req(self, req: Req) -> None:
        """Insert what the request computed so far and re-lock its new last node."""
        length = page_aligned(len(req.kv_indices), self.page_size)
        prefix = self.insert(req.key(length), req.kv_indices[:length], self._insert_extra(req))
        self.kv_pool.free(req.kv_indices[req.prefix_len : prefix])
        match = self.match_prefix(req.key(length))
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(match.last_device_node)
        new = match.device_indices
        req.kv_indices = torch.cat((new, req.kv_indices[len(new) :]))
        req.prefix_len, req.last_node = len(new), match.last_device_node

    def cache_finished_req(self, req: Req) -> None:
        """Insert the finished request, free what the tree already had, unlock."""
        length = page_aligned(len(req.kv_indices), self.page_size)
        prefix = self.insert(req.key(length), req.kv_indices[:length], self._insert_extra(req))
        self.kv_pool.free(req.kv_indices[req.prefix_len : prefix])
        self.kv_pool.free(req.kv_indices[length:])  # the unaligned tail is not cached
        self._release_request_state(req)
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    def _insert_extra(self, req: Req) -> dict[str, Any]:
        """hook: extra insert arguments taken from the request (Mamba state)."""
        return {}

    def _release_request_state(self, req: Req) -> None:
        """hook: free per-request state that the tree did not take over."""

    def check_hicache_events(self) -> None:
        """No host tier: nothing to consume."""

    # ------------------------------------------------------------------ introspection
    def iter_nodes(self) -> Iterator[Any]:
        stack = [self.root_node]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def node_count(self) -> int:
        return self.tree_nodes

    def detached_alive_nodes(self) -> int:
        """Nodes no longer in the tree but still alive: cycles or stray references."""
        return len(self._nodes) - self.tree_nodes

    def stats(self) -> dict[str, float]:
        return {
            "tree_nodes": self.tree_nodes,
            "detached_alive_nodes": self.detached_alive_nodes(),
            "full_lru": len(self.full_lru_list),
            "kv_available": self.kv_pool.available_size(),
            "full_evictable": self.full_evictable_size_,
            "full_protected": self.full_protected_size_,
        }

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        """Tree, lists and pool accounting agree; raises AssertionError if not.

        ``outstanding_kv`` is the number of KV slots held by running requests
        outside the tree (zero when idle, which is SGLang's idle check);
        ``outstanding_states`` the state slots (Mamba/SWA) they hold.
        """
        check_tree(self, outstanding_kv)
        self._sanity_extra(outstanding_states)

    def _in_full_list(self, node: Any) -> bool:
        """hook: whether a tree node belongs in the full LRU list."""
        return True

    def _sanity_extra(self, outstanding_states: int) -> None:
        """hook: component-specific checks (other lists and pools)."""
