"""The cycle explainer: which attributes tie a piece of garbage into a cycle.

:func:`explain_garbage` runs inside the garbage sampler's window on the
objects ``gc.garbage`` holds (``DEBUG_SAVEALL``). For a sample object of each
of the most common garbage types it finds, by breadth-first search over edges
that stay inside the garbage, the shortest path back to the object, each edge
named by :mod:`harness.worker.heapgraph.naming`::

    {"type": "TreeNode", "path": ["TreeNode.mamba_prev", "TreeNode.parent"],
     "length": 2, "retained_bytes": 5120, "retained_objects": 12}

It holds garbage only in locals and returns only strings and numbers, so the
garbage is freed when the window clears ``gc.garbage``; it never imports torch.
Folding cycles from many windows into shapes is the analysis's
(:mod:`harness.analysis.cycle_shapes`).
"""

from __future__ import annotations

import gc
import sys
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence

from harness.runfiles.records import Cycle
from harness.worker.heapgraph.naming import instance_dict, named_referents
from harness.worker.heapgraph.tensor_views import storage_bytes

MAX_NODES = 2000  # objects one search may visit: a window must stay short
MAX_RETAINED = 50_000  # objects counted into retained_bytes per cycle
# Seconds one call may take: garbage whose objects each hold long lists (a request's
# token ids on every node of 0.5.11's leaked SGLang trees) made one final window walk
# for over 30 s, and the run ended "hung" on the harness's own explainer.
BUDGET_S = 3.0
BUILTIN_CONTAINERS = frozenset({"list", "dict", "tuple", "set", "frozenset", "deque",
                                "cell", "function", "method"})
TRIES_PER_TYPE = 20  # objects of a type tried before deciding it sits on no cycle
MAX_TYPES = 10  # garbage types tried per call


def explain_garbage(
    garbage: Sequence[object], limit: int = 3, max_nodes: int = MAX_NODES
) -> list[Cycle]:
    """Up to ``limit`` cycles, one per garbage type, most common types first, within
    :data:`BUDGET_S` (the types and sizes not reached by then are left out)."""
    deadline = time.monotonic() + BUDGET_S
    members = {id(obj): obj for obj in garbage}
    counts = Counter(type(obj).__name__ for obj in garbage)
    found: list[Cycle] = []
    for name in _types_to_try(counts):
        if len(found) >= limit or time.monotonic() > deadline:
            break
        candidates = [obj for obj in garbage if type(obj).__name__ == name][:TRIES_PER_TYPE]
        for obj in candidates:
            explained = explain_object(obj, members, max_nodes, deadline)
            if explained is not None:
                found.append(explained)
                break
    return found


def _types_to_try(counts: Counter[str]) -> list[str]:
    """The most common garbage types, the program's own classes before the builtin
    containers that hang off them: a cycle is told by its nodes (``TreeNode.prev``), and
    searching from thousands of token lists first spent the whole budget."""
    common = [name for name, _ in counts.most_common(MAX_TYPES)]
    return sorted(common, key=lambda name: name in BUILTIN_CONTAINERS)


def explain_object(
    start: object, members: Mapping[int, object], max_nodes: int = MAX_NODES,
    deadline: float | None = None,
) -> Cycle | None:
    """The shortest cycle from ``start`` back to itself within ``members`` (by id)."""
    cycle = shortest_cycle(start, members, max_nodes, deadline)
    if cycle is None:
        return None
    names, nodes = cycle
    size, objects = retained(nodes, members, deadline)
    return {
        "type": type(start).__name__,
        "path": names,
        "length": len(names),
        "retained_bytes": size,
        "retained_objects": objects,
    }


def shortest_cycle(
    start: object, members: Mapping[int, object], max_nodes: int = MAX_NODES,
    deadline: float | None = None,
) -> tuple[list[str], list[object]] | None:
    """Edge names and objects along the shortest cycle through ``start``, or None.

    Breadth-first, so the first time an edge leads back to ``start`` the path is
    a shortest one; only objects in ``members`` are entered, since a path
    through live objects would not explain why the garbage is unreachable.
    """
    parents: dict[int, tuple[object, str]] = {}
    queue: deque[object] = deque([start])
    seen = {id(start)}
    while queue and len(seen) <= max_nodes:
        if deadline is not None and time.monotonic() > deadline:
            return None
        node = queue.popleft()
        for name, target in named_referents(node):
            if target is start:
                return _unwind(start, node, name, parents)
            if id(target) in seen or id(target) not in members:
                continue
            seen.add(id(target))
            parents[id(target)] = (node, name)
            queue.append(target)
    return None


def _unwind(
    start: object, last: object, closing: str, parents: Mapping[int, tuple[object, str]]
) -> tuple[list[str], list[object]]:
    names, nodes = [closing], [last]
    node = last
    while node is not start:
        node, name = parents[id(node)]
        names.append(name)
        nodes.append(node)
    return names[::-1], nodes[::-1]


def retained(nodes: Sequence[object], members: Mapping[int, object],
             deadline: float | None = None) -> tuple[int, int]:
    """Bytes and object count of the garbage reachable from ``nodes``: an estimate.

    ``sys.getsizeof`` of each object plus, for tensors, the storage's bytes once
    per storage (:func:`storage_bytes`); untracked
    buffers hanging off the garbage count too. Stops after ``MAX_RETAINED``
    objects or at ``deadline``, so it is a lower bound on huge heaps.
    """
    seen = {id(node) for node in nodes}
    queue: deque[object] = deque(nodes)
    storages: set[int] = set()
    total = 0
    while queue:
        if deadline is not None and time.monotonic() > deadline:
            break
        obj = queue.popleft()
        total += _sizeof(obj) + storage_bytes(obj, storages)
        for target in gc.get_referents(obj):
            if id(target) in seen or len(seen) >= MAX_RETAINED:
                continue
            if id(target) in members or _owns(obj, target):
                seen.add(id(target))
                queue.append(target)
            elif _private_leaf(target):
                seen.add(id(target))
                total += _sizeof(target)
    return total, len(seen)


def _private_leaf(target: object) -> bool:
    """An object the collector does not track (so never in ``gc.garbage``) but real
    memory of the garbage: buffers, token tuples. Small atoms are skipped, since
    they are shared with live objects (interned names, small ints)."""
    return not gc.is_tracked(target) and not isinstance(target, str | int | float | type(None))


def _owns(obj: object, target: object) -> bool:
    """``target`` is ``obj``'s own ``__dict__``: memory of ``obj`` whether listed or not.

    Reading attribute names makes CPython build an instance's dict; that dict
    then stands between the object and its values, outside the garbage list.
    """
    return type(target) is dict and instance_dict(obj) is target


def _sizeof(obj: object) -> int:
    try:
        return sys.getsizeof(obj)
    except TypeError:  # some extension types refuse
        return 0
