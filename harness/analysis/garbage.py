"""Garbage by type, live-object growth by type, collections and pauses per minute.

Inputs are the raw records of :class:`harness.runfiles.rundata.RunData`: gc callback lines
(``t``, ``gen``, ``count``, ``collected``, ``pause_s``, ``ops``), garbage windows
(``t``, ``ops``, ``count``, ``by_type``, ``bytes_by_type``) and object windows
(``t``, ``ops``, ``counts``). Operation counts are cumulative; rates are per
1000 operations (``/kop``), per hour (``/h``) or per minute (``/min``).

Cyclic garbage per operation lives in :mod:`harness.analysis.garbage_rate`
and is re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.analysis.garbage_rate import (
    Found,
    Rate,
    Record,
    block_rate,
    cyclic_garbage,
    garbage_found,
    garbage_rate,
)
from harness.runfiles.rundata import Series

# The rows summary.json stores: the analysis builds them as they are kept.
from harness.runfiles.summary_records import GarbageRow, GrowthRow

OTHER = "<other>"  # the samplers' bucket for types beyond their top list


def collections_per_min(
    gc_events: Sequence[Record], generation: int, start_s: float, end_s: float
) -> float | None:
    """Collections of one generation per minute; lines carry ``count`` (default 1)."""
    if not end_s > start_s:
        return None
    total = sum(
        int(e.get("count", 1))
        for e in gc_events
        if int(e.get("gen", -1)) == generation and start_s < float(e["t"]) <= end_s
    )
    return total / ((end_s - start_s) / 60.0)


def pause_per_min(gc_events: Sequence[Record], start_s: float, end_s: float) -> float | None:
    """Seconds of collector pause per minute of run, all generations."""
    if not end_s > start_s:
        return None
    total = sum(float(e.get("pause_s", 0.0)) for e in gc_events if start_s < float(e["t"]) <= end_s)
    return total / ((end_s - start_s) / 60.0)


def garbage_by_type(windows: Sequence[Record], start_s: float) -> list[GarbageRow]:
    """Garbage windows after ``start_s`` summed by type, most objects first."""
    chosen = [w for w in windows if float(w["t"]) >= start_s]
    objects: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for window in chosen:
        for name, count in window.get("by_type", {}).items():
            objects[name] = objects.get(name, 0) + int(count)
        for name, size in window.get("bytes_by_type", {}).items():
            sizes[name] = sizes.get(name, 0) + int(size)
    work = _ops_span(chosen)
    before = chosen[0].get("by_type", {}) if chosen else {}
    totals = [
        GarbageRow(
            name,
            count,
            sizes.get(name, 0),
            # The first window's garbage was made before the span measured.
            (count - int(before.get(name, 0))) / work * 1000.0 if work else None,
        )
        for name, count in objects.items()
    ]
    return sorted(totals, key=lambda row: (-row.objects, row.type))


def type_series(windows: Sequence[Record], field: str, types: Sequence[str]) -> dict[str, Series]:
    """Per-type series (``t`` s, objects) from windows' ``field`` (``by_type``, ``counts``).

    A type missing from a window is left out of its series, not read as zero:
    samplers only write their top types, so absence means "not among them".
    """
    result: dict[str, Series] = {}
    for name in types:
        having = [w for w in windows if name in w.get(field, {})]
        points = [(float(w["t"]), float(w[field][name])) for w in having]
        t = np.asarray([p[0] for p in points], dtype=np.float64)
        v = np.asarray([p[1] for p in points], dtype=np.float64)
        result[name] = Series(t, v, "objects")
    return result


def object_growth(windows: Sequence[Record], start_s: float) -> list[GrowthRow]:
    """Live-object change per type between its first and last window after ``start_s``.

    Sorted by growth, largest first. Per hour and per kop use the time and the
    work between those two windows (the type's own span, see :func:`type_series`).
    """
    chosen = [w for w in windows if float(w["t"]) >= start_s]
    names = {name for w in chosen for name in w.get("counts", {}) if name != OTHER}
    rows = [_growth_row(name, chosen) for name in names]
    found = [row for row in rows if row is not None]
    return sorted(found, key=lambda row: (-row.delta, row.type))


def _growth_row(name: str, windows: Sequence[Record]) -> GrowthRow | None:
    seen = [w for w in windows if name in w.get("counts", {})]
    if len(seen) < 2:
        return None
    first, last = seen[0], seen[-1]
    hours = (float(last["t"]) - float(first["t"])) / 3600.0
    if hours <= 0:
        return None
    delta = int(last["counts"][name]) - int(first["counts"][name])
    work = float(last.get("ops", 0)) - float(first.get("ops", 0))
    return GrowthRow(
        type=name,
        first=int(first["counts"][name]),
        last=int(last["counts"][name]),
        delta=delta,
        per_h=delta / hours,
        per_kop=delta / work * 1000.0 if work > 0 else None,
    )


def _ops_span(windows: Sequence[Record]) -> float:
    """Operations covered by windows: each window holds garbage made since the one before."""
    ops = [float(w.get("ops", 0)) for w in windows]
    return max(ops) - min(ops) if len(ops) >= 2 else 0.0


__all__ = [
    "Found", "Rate", "block_rate", "collections_per_min",
    "cyclic_garbage", "garbage_by_type", "garbage_found", "garbage_rate", "object_growth",
    "pause_per_min", "type_series",
]
