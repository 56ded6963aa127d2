"""Cycle shapes: the explained cycles of many garbage windows, folded and counted.

The explainer (:mod:`harness.worker.heapgraph.cycles`, in the worker) writes one
path per cycle, such as ``["TreeNode.mamba_prev", "TreeNode.parent"]``. The same cycle found from
its other member is a rotation of that path, and list indices or dict keys
differ from node to node, so paths are normalised into shapes before counting.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CycleShape:
    """A cycle shape (edges, canonical rotation) seen ``count`` times."""

    shape: tuple[str, ...]
    count: int
    retained_bytes: int  # summed over the cycles of this shape
    types: tuple[str, ...]  # start types it was found from

    def describe(self) -> str:
        return " -> ".join((*self.shape, "(back)"))


def cycle_shape(path: Sequence[str]) -> tuple[str, ...]:
    """``path`` with indices and keys blanked (``list[3]`` -> ``list[]``), rotated canonically.

    The same cycle found from another member is a rotation of the same path.
    """
    edges = [edge[: edge.index("[")] + "[]" if "[" in edge else edge for edge in path]
    if not edges:
        return ()
    return min(tuple(edges[i:] + edges[:i]) for i in range(len(edges)))


def aggregate_cycles(cycles: Iterable[Mapping[str, Any]], top: int = 10) -> list[CycleShape]:
    """The ``top`` most common cycle shapes in ``cycles`` (dicts from any windows)."""
    counts: Counter[tuple[str, ...]] = Counter()
    sizes: Counter[tuple[str, ...]] = Counter()
    types: dict[tuple[str, ...], set[str]] = {}
    for cycle in cycles:
        shape = cycle_shape(list(cycle.get("path", ())))
        if not shape:
            continue
        counts[shape] += 1
        sizes[shape] += int(cycle.get("retained_bytes", 0))
        types.setdefault(shape, set()).add(str(cycle.get("type", "?")))
    ranked = sorted(counts, key=lambda s: (-counts[s], -sizes[s], s))[:top]
    return [CycleShape(s, counts[s], sizes[s], tuple(sorted(types[s]))) for s in ranked]
