"""Arrays the gc and garbage plots draw, from raw records: pure, testable.

Drawing choices only: the verdict's numbers come from the analysis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.runfiles.rundata import FloatArray

GENERATIONS = (0, 1, 2)
TOP_TYPES = 8  # garbage types drawn separately; the rest stack as "other"
MAX_BARS = 60  # garbage windows merged beyond this: a 24 h run stays legible (and quick)
OTHER = "other types"


@dataclass(frozen=True)
class GcTotals:
    """Running totals per generation: collections and objects freed, at each gc line's time.

    Totals rather than rates per bucket: gen-2 collections are rare and lumpy,
    and a rate over short buckets shows "12 per minute" spikes that never
    happened; the slope of a running total is the rate, without a bucket size.
    """

    t: dict[int, FloatArray]
    collections: dict[int, FloatArray]
    freed: dict[int, FloatArray]

    def per_min(self, gen: int, values: dict[int, FloatArray], span_s: float) -> float:
        """Average per minute over ``span_s``; 0 for a generation never seen."""
        if gen not in values or not values[gen].size or span_s <= 0:
            return 0.0
        return float(values[gen][-1]) / (span_s / 60.0)


def gc_totals(events: Sequence[Mapping[str, Any]]) -> GcTotals | None:
    """Running totals by generation; None without gc lines."""
    if not events:
        return None
    ordered = sorted(events, key=lambda e: float(e["t"]))
    t: dict[int, FloatArray] = {}
    collections: dict[int, FloatArray] = {}
    freed: dict[int, FloatArray] = {}
    for gen in GENERATIONS:
        mine = [e for e in ordered if int(e.get("gen", -1)) == gen]
        if not mine:
            continue
        t[gen] = np.asarray([float(e["t"]) for e in mine])
        collections[gen] = np.cumsum([float(e.get("count", 1)) for e in mine])
        freed[gen] = np.cumsum([float(e.get("collected", 0)) for e in mine])
    return GcTotals(t, collections, freed)


@dataclass(frozen=True)
class GarbageStack:
    """Objects found per garbage window (mean per window of a merged group), by type."""

    t: FloatArray  # window times (s); a merged group sits at its last window
    types: list[str]  # most objects first; OTHER last when present
    counts: FloatArray  # shape (len(types), len(t))
    merged: int  # windows per bar (1 when not merged)


def garbage_stack(
    windows: Sequence[Mapping[str, Any]], top: int = TOP_TYPES
) -> GarbageStack | None:
    """Garbage by type per window; None when no window found any garbage."""
    if not windows or not any(int(w.get("count", 0)) for w in windows):
        return None
    totals: dict[str, float] = {}
    for window in windows:
        for name, n in (window.get("by_type") or {}).items():
            totals[name] = totals.get(name, 0.0) + float(n)
    ranked = sorted(totals, key=lambda name: (-totals[name], name))
    shown, rest = ranked[:top], ranked[top:]
    types = [*shown, OTHER] if rest else shown
    counts = np.zeros((len(types), len(windows)))
    for column, window in enumerate(windows):
        by_type = window.get("by_type") or {}
        for row, name in enumerate(shown):
            counts[row, column] = float(by_type.get(name, 0))
        if rest:
            counts[-1, column] = sum(float(by_type.get(name, 0)) for name in rest)
    t = np.asarray([float(w["t"]) for w in windows])
    return _merge(GarbageStack(t, types, counts, 1))


def _merge(stack: GarbageStack, max_bars: int = MAX_BARS) -> GarbageStack:
    """Average consecutive windows so at most ``max_bars`` bars are drawn.

    The mean, not the sum: a last group with fewer windows would otherwise
    look like a drop in garbage.
    """
    n = stack.t.size
    if n <= max_bars:
        return stack
    group = int(np.ceil(n / max_bars))
    starts = np.arange(0, n, group)
    last = np.minimum(starts + group, n) - 1
    sizes = (last - starts + 1).astype(np.float64)
    counts = np.add.reduceat(stack.counts, starts, axis=1) / sizes
    return GarbageStack(stack.t[last], stack.types, counts, group)
