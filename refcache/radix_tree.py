"""RadixTree: the tree machinery every cache in the package reuses.

Structure follows SGLang's ``RadixCache``: nodes hold a key (a run of tokens)
and a value (the KV slot ids of those tokens); children are keyed by
``child_key``; ``match_prefix`` splits a node when a match ends inside it.
Subclasses add per-component state through the hooks marked ``hook``.
Eviction, locks and requests live one level up, in
``refcache.radix.RadixCache``; nothing builds a bare ``RadixTree``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from refcache.keys import RadixKey, child_key, match_length, page_aligned
from refcache.lru import LRUList
from refcache.node import BaseNode, tick
from refcache.pools import SlotAllocator
from refcache.regressions import validate


@dataclass
class MatchResult:
    device_indices: torch.Tensor
    last_device_node: Any
    last_host_node: Any
    host_hit_length: int = 0


class RadixTree:
    node_cls: type[BaseNode] = BaseNode
    SPLIT_VIEWS_REGRESSION = "radix-split-views"

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
        new.value = self._kept(child.value[:split_len])
        new.lock_ref = child.lock_ref
        new.last_access_time = child.last_access_time
        new.hit_count = child.hit_count
        child.key = child.key[split_len:]
        child.value = self._kept(child.value[split_len:])
        return self._finish_split(new, child, split_len)

    def _kept(self, indices: torch.Tensor) -> torch.Tensor:
        """What a node keeps of a slice of KV indices: a copy of its own (#17191's fix).

        Under ``radix-split-views`` the slice itself, as SGLang ran before
        PR #17191: a view keeps the whole storage it was cut from (a request's
        indices, an evicted sibling's half) allocated for as long as it lives.
        """
        return indices if self.SPLIT_VIEWS_REGRESSION in self.inject else indices.clone()

    def _finish_split(self, new: Any, child: Any, split_len: int) -> Any:
        """Hang ``new`` between ``child`` and its parent once the key is cut.

        Shared with the host tier's split of a host-only node, which has no
        device value to cut."""
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
        leaf.parent, leaf.key, leaf.value = parent, key, self._kept(value)
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

    # ------------------------------------------------------------------ walks
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
