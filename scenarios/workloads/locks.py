"""Where the locks a cache still holds at idle were taken: the cause of a lock leak.

A forgotten ``dec_lock_ref`` shows as protected slots with no request running
(``locked_while_idle``), then as a pool that cannot evict and a waiting queue
that grows; none of these says which lock was never released. The ledger
wraps the cache's ``inc_lock_ref`` and ``dec_lock_ref`` on the instance (the
cache's own calls go through it too) and remembers, per node still locked,
the call sites that locked it. At an idle moment the nodes still locked are
the leaked ones, and their lock sites are the answer.

The ledger remembers a node only while it is locked (``lock_ref`` above zero,
as on SGLang's ``TreeNode``; without that attribute, while its locks outnumber
its unlocks), through a weak reference where the node type allows one, and per
node a count per distinct site, so it stays small and keeps nothing alive.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

TOP_SITES = 3


class LockLedger:
    def __init__(self, cache: Any) -> None:
        # Weak references where the node type allows: the ledger must not keep a
        # node alive (nor show up as its owner), only remember it while it lives.
        self._held: dict[int, tuple[Callable[[], Any], Counter[str]]] = {}
        # SGLang's inc_lock_ref stops at the root, whose lock_ref stays 1: a request
        # that matched nothing "locks" the root, and that lock is no one's to release.
        self._root = getattr(cache, "root_node", None)
        self.active = _wrap(cache, "inc_lock_ref", self._locked) and _wrap(
            cache, "dec_lock_ref", self._unlocked)

    def _locked(self, node: Any) -> None:
        if node is self._root and self._root is not None:
            return
        frame = sys._getframe(2)  # the caller of inc_lock_ref, past the wrapper
        site = f"{_short(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"
        entry = self._held.get(id(node))
        if entry is None or entry[0]() is not node:  # new, or an old node's id reused
            entry = self._held[id(node)] = (_reference(node), Counter())
        entry[1][site] += 1

    def _unlocked(self, node: Any) -> None:
        entry = self._held.get(id(node))
        if entry is None:
            return
        sites = entry[1]
        lock_ref = getattr(node, "lock_ref", None)
        if lock_ref is None:  # no count of its own: balance the ledger's
            site = next(iter(sites))
            sites[site] -= 1
            sites += Counter()  # drops sites at zero
            lock_ref = sum(sites.values())
        if lock_ref <= 0:
            del self._held[id(node)]

    def still_locked(self) -> dict[str, Any]:
        """The nodes locked now and where; call with no request running."""
        nodes, sites = 0, Counter[str]()
        for reference, locked_at in list(self._held.values()):
            node = reference()
            if node is not None and getattr(node, "lock_ref", 1) > 0:
                nodes += 1
                sites.update(set(locked_at))  # nodes per site: a held node is locked again
        return {"nodes": nodes, "sites": [{"site": s, "nodes": n}
                                          for s, n in sites.most_common(TOP_SITES)]}


def _reference(node: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(node)
    except TypeError:  # no weak references to this type: hold it while it is locked
        return lambda: node


def _wrap(cache: Any, name: str, record: Callable[[Any], None]) -> bool:
    """Replace ``cache.<name>`` by a recording wrapper; False if it cannot be set."""
    original = getattr(cache, name, None)
    if not callable(original):
        return False

    def wrapper(node: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(node, *args, **kwargs)
        record(node)
        return result

    try:
        setattr(cache, name, wrapper)
    except (AttributeError, TypeError):  # __slots__ or a read-only proxy
        return False
    return True


def _short(filename: str) -> str:
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
