"""Live object counts by type and their growth between windows.

The count walks every GC-tracked object (``objgraph.typestats``' short names,
counted in C), which takes most of a second on a multi-million-object heap,
hence the low default rate. Being C from start to end, it never lets go of the GIL: a
recorded program's threads cannot run, and keep alive what they drop, while
every object is held. It does not force a collection, so uncollected cyclic
garbage counts as live here, which is what RSS sees too. A line keeps the
most numerous types and every type that grew since the previous window, so
per-type series stay continuous for the types that matter without writing
thousands of names each time.
"""

from __future__ import annotations

import gc
from collections import Counter

from harness.runfiles.records import ObjectsLine
from harness.worker.samplers.base import PeriodicSampler

TOP_TYPES = 50
TOP_GROWTH = 20


class ObjectsSampler(PeriodicSampler):
    name = "objects"

    def __init__(self, interval_s: float = 15.0) -> None:
        super().__init__(interval_s)
        self._previous: dict[str, int] = {}

    def unavailable(self) -> str | None:
        return None  # only needs the gc module

    def on_start(self, now: float) -> None:
        self.take(now)  # the baseline the first growth is measured from
        super().on_start(self.now())

    def take(self, now: float, final: bool = False) -> None:
        counts = type_counts(gc.get_objects())
        growth = grown(self._previous, counts) if self._previous else {}
        largest = sorted(counts, key=counts.__getitem__, reverse=True)[:TOP_TYPES]
        kept = {name: counts[name] for name in [*largest, *growth]}
        self._previous = counts
        line: ObjectsLine = {
            "type": "objects", "t": now, "ops": self.ops, "counts": kept, "growth": growth,
            "total": sum(counts.values()),
        }
        self.sink.line(line)


def type_counts(objects: list[object]) -> dict[str, int]:
    """How many of ``objects`` there are of each type name (types of one name summed)."""
    by_type = Counter(map(type, objects))  # counted in C, see the module docstring
    counts: dict[str, int] = {}
    for kind, n in by_type.items():
        counts[kind.__name__] = counts.get(kind.__name__, 0) + n
    return counts


def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The TOP_GROWTH types whose live count rose most, with the increase."""
    deltas = {name: n - before.get(name, 0) for name, n in after.items()}
    rising = sorted((name for name, d in deltas.items() if d > 0), key=deltas.__getitem__)
    return {name: deltas[name] for name in reversed(rising[-TOP_GROWTH:])}
