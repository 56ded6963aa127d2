"""The harness's own windows, taken out of the series a verdict is judged on.

An allocation window (tracemalloc, ~2x slower) moves memory itself: while it
traces, its samples describe the harness, not the program, so they are
dropped; after it stops, it may leave a little behind (its freed tables
fragment the heap), a step up that no production process would show, so that
step is taken off the later samples (:func:`bridged`).

A garbage window forces full collections, which free cyclic garbage that a
production process would hold for longer; what it released is added back
(:func:`held_back`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from harness.analysis.slope import robust_spread, sen_slope
from harness.runfiles.records import GarbageLine
from harness.runfiles.rundata import RunData, Series, outside

# The level each side of a window is the median over BRIDGE_S seconds of the
# series less its slope. The 5 samples nearest the window (half a second) were
# too few: the fixed cache's heap wanders +-30 KB within a second or two, and a
# residue misjudged by that much is a step that tilts a 60 s slope by 1-2 MB/h.
# A stretch holding a jump (a buffer taken or freed: one change JUMP times the
# usual) falls back to the BRIDGE_SAMPLES nearest samples, which rarely straddle it.
BRIDGE_S = 3.0
BRIDGE_SAMPLES = 5
JUMP = 8.0
Span = tuple[float, float]


def attribution_windows(run: RunData) -> list[Span]:
    """The (start, end) of every allocation window (:meth:`RunData.traced_spans`)."""
    return run.traced_spans()


def traced_bytes(run: RunData) -> dict[float, float]:
    """Per window start, the memory tracemalloc itself held when the window stopped.

    What a window leaves behind is part of what it held, so this bounds the
    step :func:`bridged` may take off a byte series. Runs recorded before the
    worker wrote it have none: their steps are bounded only below (at 0).
    """
    starts: dict[int, float] = {}
    held: dict[float, float] = {}
    for event in run.events:
        if event.get("name") != "attribution":
            continue
        window = int(event.get("window", -1))
        if event.get("phase") == "start":
            starts[window] = float(event["t"])
        elif window in starts and "traced_bytes" in event:
            held[starts.pop(window)] = float(event["traced_bytes"])
    return held


def without(series: Series, windows: Sequence[Span]) -> Series:
    """``series`` minus the samples taken inside any of ``windows``."""
    if not windows or not len(series):
        return series
    keep = outside(series.t, windows)
    return Series(series.t[keep], series.v[keep], series.unit)


def bridged(
    series: Series, windows: Sequence[Span], bounds: Mapping[float, float] | None = None
) -> Series:
    """``series`` without a window's samples and without the level a window leaves behind.

    tracemalloc leaves memory behind when it stops (measured: 5-130 KB of C
    heap per window, more on a large workload). Each window's residue is the
    level after it minus the level before it, less what the series' own slope
    accounts for over the gap, and is taken off every later sample; the slope
    is the median of the slopes of the stretches between windows (one line
    through the steps would count them as growth).

    A residue is only ever an increase, and for a byte series no more than
    ``bounds`` (what tracemalloc held, per window start) allows: a window
    cannot free the program's memory, nor leave behind more than it had. A
    fall across a window, or a rise beyond the bound, is the program's own (a
    buffer freed or taken while the window ran) and stays: correcting it
    turned a 16 MB sawtooth into a staircase that read as 5 GB/h of growth.
    """
    kept = without(series, windows)
    closed = [(start, end) for start, end in windows if math.isfinite(end)]
    if not closed or len(kept) < 2 * BRIDGE_SAMPLES:
        return kept
    per_s = _within_segments_slope(kept, closed)
    limits = bounds if bounds is not None and series.unit == "B" else {}
    v = kept.v.copy()
    for start, end in sorted(closed):
        before, after = np.flatnonzero(kept.t < start), np.flatnonzero(kept.t > end)
        if before.size < BRIDGE_SAMPLES or after.size < BRIDGE_SAMPLES:
            continue
        before = _side(v, before[kept.t[before] >= start - BRIDGE_S], before[-BRIDGE_SAMPLES:])
        after = _side(v, after[kept.t[after] <= end + BRIDGE_S], after[:BRIDGE_SAMPLES])
        residue = _level(kept.t, v, per_s, after) - _level(kept.t, v, per_s, before)
        if residue <= limits.get(start, math.inf):
            v[kept.t > end] -= max(residue, 0.0)
    return Series(kept.t, v, kept.unit)


def residues_taken_off(raw: Series, judged: Series, windows: Sequence[Span]) -> list[list[float]]:
    """``[end_s, amount]`` per window whose residue :func:`bridged` took off ``raw``'s
    later samples to make ``judged``: a report draws the series as it was judged."""
    kept = without(raw, windows)
    if kept.t.size != judged.t.size or not kept.t.size:
        return []
    offset = kept.v - judged.v
    found = []
    for _, end in sorted(w for w in windows if math.isfinite(w[1])):
        after = np.flatnonzero(kept.t > end)
        before = np.flatnonzero(kept.t <= end)
        if after.size and before.size:
            amount = float(offset[after[0]] - offset[before[-1]])
            if amount > 0:
                found.append([end, amount])
    return found


def _side(v: np.ndarray, stretch: np.ndarray, nearest: np.ndarray) -> np.ndarray:
    """The samples that set a side's level: ``stretch``, or ``nearest`` if it holds a jump."""
    if stretch.size <= nearest.size:
        return nearest
    changes = np.abs(np.diff(v[stretch]))
    usual = robust_spread(changes - np.median(changes)) + float(np.median(changes))
    return stretch if float(changes.max()) <= JUMP * usual else nearest


def _level(t: np.ndarray, v: np.ndarray, per_s: float, picked: np.ndarray) -> float:
    """Median of ``v`` less the series' slope over the ``picked`` samples."""
    return float(np.median(v[picked] - per_s * t[picked]))


def _within_segments_slope(series: Series, windows: Sequence[Span]) -> float:
    """The flattest slope (per second) of the stretches of ``series`` between windows.

    Under a steady leak every stretch has its slope and the flattest is it (a
    little low with noise: a little of the growth across a window is taken off
    with the residue, never more than tracemalloc held). A stretch holding the
    end of a fill has the fill's slope: the leak zoo's memo filled for 4 s, and
    with the median (of two stretches, their mean) the 110 KB a window left
    behind read as the fill going on, was kept, and a flat memo read 38 MB/h.
    """
    edges = [-math.inf, *sorted(x for w in windows for x in w), math.inf]
    slopes = []
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):
        inside = (series.t > lo) & (series.t < hi)
        if np.count_nonzero(inside) >= 2 * BRIDGE_SAMPLES:
            fitted = sen_slope(series.t[inside], series.v[inside])
            if fitted is not None:
                slopes.append(fitted.per_h / 3600.0)
    return min(slopes, key=abs) if slopes else 0.0


def held_back(series: Series, windows: Sequence[GarbageLine], name: str) -> Series:
    """``series`` as a process without the harness's own collections would hold it.

    Each garbage window forces full collections and frees cyclic garbage that a
    production process with rare gen-2 collections keeps; the window records
    how much of ``name`` that released, and it is added back to every later
    sample. Without this, a leak of cycles would look flat in the heap while
    the process it stands for grows (only the cyclic-garbage budget would see it).
    """
    released = [(float(w["t"]), float(w.get("released", {}).get(name, 0.0))) for w in windows]
    released = [(t, amount) for t, amount in released if amount > 0]
    if not released:
        return series
    times = np.asarray([t for t, _ in released])
    totals = np.cumsum([amount for _, amount in released])
    index = np.searchsorted(times, series.t, side="left")  # windows strictly before each sample
    added = np.concatenate(([0.0], totals))[index]
    return Series(series.t, series.v + added, series.unit)
