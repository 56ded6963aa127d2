"""Intrusive doubly linked LRU lists over tree nodes.

The head sentinel is the most recently used side, the tail the least recently
used. Pointer and lock attribute names are parameters, so one node can sit in
several lists at once (``prev``/``next``, ``mamba_prev``/``mamba_next``, ...).

``_unlink`` is the site of incident 1: with ``clear_pointers=False`` (the
``*-lru-unlink`` regressions) a removed node keeps pointing at its old
neighbours. Nodes leave their lists at different times, so those stale pointers
end up closing reference cycles among evicted nodes that only a gen-2
collection can free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Node = Any  # any object with the configured attributes (each cache has its TreeNode)


class Sentinel:
    """Head or tail of a list: carries just the attributes the walks read."""

    def __init__(self) -> None:
        self.children: dict[Any, Any] = {}
        self.id = -1


class LRUList:
    def __init__(
        self,
        prev: str = "prev",
        next: str = "next",
        lock: str = "lock_ref",
        clear_pointers: bool = True,
    ) -> None:
        self.prv, self.nxt, self.lock = prev, next, lock
        self.clear_pointers = clear_pointers
        self.head = self._sentinel()
        self.tail = self._sentinel()
        self._set_next(self.head, self.tail)
        self._set_prev(self.tail, self.head)
        self.members: dict[int, Node] = {}

    # -- pointer access (overridden by the Unified cache's per-component lists)
    def _sentinel(self) -> Node:
        s = Sentinel()
        setattr(s, self.lock, 1)  # sentinels count as locked so walks stop on them
        return s

    def _prev(self, node: Node) -> Node:
        return getattr(node, self.prv)

    def _next(self, node: Node) -> Node:
        return getattr(node, self.nxt)

    def _set_prev(self, node: Node, value: Node) -> None:
        setattr(node, self.prv, value)

    def _set_next(self, node: Node, value: Node) -> None:
        setattr(node, self.nxt, value)

    def _locked(self, node: Node) -> bool:
        return bool(getattr(node, self.lock) > 0)

    # -- linking
    def _link_after(self, anchor: Node, node: Node) -> None:
        after = self._next(anchor)
        self._set_prev(node, anchor)
        self._set_next(node, after)
        self._set_prev(after, node)
        self._set_next(anchor, node)

    def _unlink(self, node: Node) -> None:
        before, after = self._prev(node), self._next(node)
        self._set_next(before, after)
        self._set_prev(after, before)
        if self.clear_pointers:
            # The fix for incident 1: a removed node must not keep its neighbours alive.
            self._set_prev(node, None)
            self._set_next(node, None)

    # -- public operations
    def __len__(self) -> int:
        return len(self.members)

    def in_list(self, node: Node | None) -> bool:
        return node is not None and node.id in self.members

    def insert_mru(self, node: Node) -> None:
        if node.id in self.members:
            raise AssertionError(f"node {node.id} is already in the list")
        self.members[node.id] = node
        self._link_after(self.head, node)

    def remove_node(self, node: Node) -> None:
        if self.members.pop(node.id, None) is None:
            raise AssertionError(f"node {node.id} is not in the list")
        self._unlink(node)

    def reset_node_mru(self, node: Node) -> None:
        self._unlink(node)
        self._link_after(self.head, node)

    def reset_node_and_parents_mru(
        self, node: Node, root: Node, member: Callable[[Node], bool] | None = None
    ) -> None:
        """Move node and its ancestors to the MRU end, each child just before its parent.

        ``member`` says which ancestors belong to this list (a tombstone is in the
        full list but not in the mamba list); they are skipped, not moved.
        """
        anchor = self.head
        while node is not root:
            if member is None or member(node):
                self._unlink(node)
                self._link_after(anchor, node)
                anchor = node
            node = node.parent

    # -- walks from the LRU end
    def lru_no_lock(self) -> Node | None:
        return self.prev_no_lock(self.tail)

    def leaf_lru_no_lock(self) -> Node | None:
        return self.prev_leaf_no_lock(self.tail)

    def prev_no_lock(self, node: Node) -> Node | None:
        """The next more recently used unlocked node, or None at the head."""
        x = self._prev(node)
        while x is not self.head and self._locked(x):
            x = self._prev(x)
        return None if x is self.head else x

    def prev_leaf_no_lock(self, node: Node) -> Node | None:
        x = self._prev(node)
        while x is not self.head and (self._locked(x) or x.children):
            x = self._prev(x)
        return None if x is self.head else x

    def iter_lru(self) -> Iterator[Node]:
        """Members from least to most recently used."""
        x = self._prev(self.tail)
        while x is not self.head:
            yield x
            x = self._prev(x)

    def check(self) -> None:
        """The links and the membership table agree (used by sanity checks)."""
        seen = [n.id for n in self.iter_lru()]
        if len(seen) != len(self.members) or set(seen) != set(self.members):
            raise AssertionError(
                f"LRU list {self.prv}: {len(seen)} linked vs {len(self.members)} members"
            )
