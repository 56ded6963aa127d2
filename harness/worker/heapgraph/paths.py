"""Owner paths as text: a chain of objects from its root down, named edge by edge.

``frame mod.f (f.py:3).cache -> Cache.nodes -> dict[12] -> TreeNode``: the
edges are named by :mod:`harness.worker.heapgraph.naming`, from the root down,
ending with the held object's type; :func:`shape` blanks keys and indices so
paths that say the same can be counted together.
"""

from __future__ import annotations

import re
import types
from collections import deque
from collections.abc import Sequence

from harness.worker.heapgraph.naming import class_dict, edge_name, label
from harness.worker.heapgraph.roots import Roots
from harness.worker.heapgraph.search import Found
from harness.worker.heapgraph.tensor_views import base_of


def describe(nodes: Sequence[object], roots: Roots) -> str:
    """``first edge -> ... -> Type`` for a chain of objects from its root down."""
    edges: list[str] = []
    local = roots.local_edges.get(id(nodes[0]))
    index = 0
    if local is not None:
        edges.append(local[0])
    elif id(nodes[0]) in roots.modules and len(nodes) > 1:
        module = roots.modules[id(nodes[0])]
        edges.append(_global_edge(module, nodes[0], nodes[1]))
        index = 1
    while index < len(nodes) - 1:
        name, step = _edge(nodes, index)
        edges.append(name)
        index += step
    edges.append(type(nodes[-1]).__name__)
    return " -> ".join(edges)


CONTAINERS = (list, dict, set, frozenset, tuple, deque)


def holding_container(nodes: Sequence[object]) -> int:
    """Entries of the container that holds the object itself (the last hop), 0 when an
    attribute or a frame holds it: how many like it that one holder keeps."""
    if len(nodes) < 3:
        return 0
    before, holder = nodes[-3], nodes[-2]
    if isinstance(holder, CONTAINERS) and not _is_namespace(before, holder):
        return len(holder)
    return 0


def _global_edge(module: str, namespace: object, value: object) -> str:
    name = edge_name(namespace, value)  # "dict['NAME']"
    if name is not None and name.startswith("dict['") and name.endswith("']"):
        return f"{module}.{name[6:-2]}"
    return f"{module}{name[4:]}" if name is not None else f"{module}.<ref>"


def _edge(nodes: Sequence[object], index: int) -> tuple[str, int]:
    """The edge leaving ``nodes[index]`` and how many objects it spans.

    An owner that names the object after next directly skips the one between
    (an instance's or a class's ``__dict__``, a function's closure tuple); a
    cell is passed through to its content, since the edge into it named the
    variable.
    """
    owner, to = nodes[index], index + 1
    name = None
    if index + 2 < len(nodes) and (
        isinstance(owner, types.FunctionType) or _is_namespace(owner, nodes[index + 1])
    ):
        ahead = edge_name(owner, nodes[index + 2])
        if ahead is not None and not ahead.endswith(".<ref>"):
            name, to = ahead, index + 2
    if name is None:
        name = edge_name(owner, nodes[to]) or (
            f"{label(owner)}._base" if base_of(owner) is nodes[to]
            else f"{label(owner)}.<ref>"
        )
    if isinstance(nodes[to], types.CellType) and to + 1 < len(nodes):
        to += 1
    return name, to - index


def _is_namespace(owner: object, between: object) -> bool:
    if isinstance(owner, type):
        return class_dict(owner) is between
    try:
        return object.__getattribute__(owner, "__dict__") is between
    except (AttributeError, TypeError):
        return False


def shape(path: str) -> str:
    """A path with keys and indices blanked, to count paths that say the same; a base
    tensor reached through its view counts as held where the view is."""
    return re.sub(r" -> \w+\._base -> (\w+)$", r" -> \1", re.sub(r"\[[^\]]*\]", "[]", path))


def through(found: Found, edge: str | None, short: str) -> Found:
    """A holder's path continued to one untracked object it holds."""
    if found.path is None or edge is None:
        return found
    head = found.path.rsplit(" -> ", 1)[0] + " -> " if " -> " in found.path else ""
    return Found(f"{head}{edge} -> {short}", found.root, (found.depth or 0) + 1,
                 holds=found.holds)
