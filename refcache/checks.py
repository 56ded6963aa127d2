"""Invariants every cache must keep, checked after any operation in tests.

Kept apart from the caches so the checks read as a specification: tree links,
LRU membership, lock refs and pool accounting (``available + evictable +
protected == total``, SGLang's idle check, plus what running requests hold).
"""

from __future__ import annotations

from typing import Any

from refcache.keys import child_key


def check_links(cache: Any) -> list[Any]:
    """Every child sits at ``parent.children[child_key(child.key)]``; returns the nodes."""
    nodes = []
    for node in cache.iter_nodes():
        nodes.append(node)
        if node.lock_ref < 0:
            raise AssertionError(f"node {node.id} has negative lock_ref")
        for key, child in node.children.items():
            if child.parent is not node:
                raise AssertionError(f"node {child.id}: parent link broken")
            if child_key(child.key, cache.page_size) != key:
                raise AssertionError(f"node {child.id}: sits under the wrong child key")
            if len(child.key) == 0:
                raise AssertionError(f"node {child.id}: empty key")
    if len(nodes) != cache.tree_nodes:
        raise AssertionError(f"tree walk found {len(nodes)} nodes, counter says {cache.tree_nodes}")
    return nodes


def check_lock_order(nodes: list[Any], root: Any) -> None:
    """A locked node's parent is locked at least as much (locks run to the root)."""
    for node in nodes:
        if node is not root and node.parent is not root and node.parent.lock_ref < node.lock_ref:
            raise AssertionError(f"node {node.id} locked more than its parent")


def device_tokens(nodes: list[Any], root: Any, locked: bool) -> int:
    return sum(
        len(n.value)
        for n in nodes
        if n is not root and n.value is not None and (n.lock_ref > 0) == locked
    )


def check_full_accounting(cache: Any, nodes: list[Any], outstanding_kv: int) -> None:
    root = cache.root_node
    evictable, protected = device_tokens(nodes, root, False), device_tokens(nodes, root, True)
    if (evictable, protected) != (cache.full_evictable_size_, cache.full_protected_size_):
        raise AssertionError(
            f"full sizes: tree has evictable={evictable} protected={protected}, counters say "
            f"{cache.full_evictable_size_}/{cache.full_protected_size_}"
        )
    pool = cache.kv_pool
    total = pool.available_size() + evictable + protected + outstanding_kv
    if total != pool.size:
        raise AssertionError(
            f"kv pool: available {pool.available_size()} + evictable {evictable} + protected "
            f"{protected} + requests {outstanding_kv} = {total} != total {pool.size}"
        )


def check_list_members(lst: Any, expected: list[Any], name: str) -> None:
    lst.check()
    if set(lst.members) != {n.id for n in expected}:
        raise AssertionError(
            f"{name} list has {len(lst.members)} members, the tree says {len(expected)}"
        )


def check_tree(cache: Any, outstanding_kv: int = 0) -> None:
    nodes = check_links(cache)
    check_lock_order(nodes, cache.root_node)
    check_full_accounting(cache, nodes, outstanding_kv)
    full = [n for n in nodes if n is not cache.root_node and cache._in_full_list(n)]
    check_list_members(cache.full_lru_list, full, "full")
