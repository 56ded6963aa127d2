"""Shapes a memory series takes that are not a steady leak, found before judging.

- warm-up: the initial transient (imports, arenas, caches filling) before the
  steady state; cut with MSER (White 1997), fitting a line instead of a mean.
- sawtooth: rises and sudden drops, as gen-2 collections free cyclic garbage
  or a program frees a large buffer; the bottoms of the drops are the floor
  (after a collection: the post-collection floor).
- step: one jump between two flat-ish levels (a pool or arena grown once).

All functions take ``t`` in seconds (sorted) and ``v`` in the series' unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.slope import block_means, residuals, robust_spread
from harness.runfiles.rundata import FloatArray

WARMUP_MAX_FRACTION = 1 / 3  # never call more than a third of a window "warm-up"
DROP_SIGMAS = 5.0  # a drop beats 5 robust sd of one-sample changes...
DROP_SPREADS = 2.0  # ...and 2 robust sd of the level around its trend
DROP_MAX_SAMPLES = 3  # a collection frees within a sample or two, not over a minute
MIN_DROPS = 3  # two drops could be chance; three make a pattern
STEP_SSE_RATIO = 0.25  # a step model must fit 4x better than a line
STEP_MIN_POINTS = 12
STEP_ABRUPT = 0.4  # one neighbour-to-neighbour change carries 40% of the height


@dataclass(frozen=True)
class Sawtooth:
    """Bottoms of the drops (the post-collection floor) and their count."""

    floor_t: FloatArray
    floor_v: FloatArray

    @property
    def drops(self) -> int:
        return int(self.floor_t.size)


@dataclass(frozen=True)
class Step:
    """One level change: at ``at_s`` seconds, by ``height`` (series unit)."""

    at_s: float
    height: float


@dataclass(frozen=True)
class Level:
    """Highest value (``peak``) and highest value held for ``held_for`` samples."""

    peak: float
    sustained: float
    held_for: int = 3


SUSTAIN = 3  # a level budget breaks only if the value stays over it this many samples
# A census reads what the program holds seconds apart (its cost paces it; a
# worker takes it between operations): two readings span longer than SUSTAIN
# gauge samples (0.5 s apart) do, and a third came 9 to 11 s into a run.
CENSUS_SUSTAIN = 2


def warmup_end(t: FloatArray, v: FloatArray) -> float:
    """Seconds at which the initial transient ends (``t[0]`` if there is none).

    MSER picks the cut ``d`` minimising ``SSE_d / (m - d)**2``: the squared
    standard error of the fit on what remains. Dropping data costs in the
    denominator, so only a start that fits the later line badly is cut.
    """
    tb, vb = block_means(t, v)
    m = tb.size
    if m < 8 or np.ptp(tb) == 0:
        return float(t[0]) if t.size else 0.0
    best, best_cut = np.inf, 0
    for cut in range(int(m * WARMUP_MAX_FRACTION) + 1):
        if m - cut < 4:
            break
        tt, vv = tb[cut:] - tb[cut], vb[cut:]
        fit = np.polyfit(tt, vv, 1)
        sse = float(np.sum((vv - np.polyval(fit, tt)) ** 2))
        score = sse / (m - cut) ** 2
        if score < best:
            best, best_cut = score, cut
    return float(t[0]) if best_cut == 0 else float(tb[best_cut])


def find_sawtooth(t: FloatArray, v: FloatArray, per_h: float) -> Sawtooth | None:
    """The post-collection floor, if ``v`` drops suddenly at least ``MIN_DROPS`` times.

    ``per_h`` is the series' overall slope, used to measure the spread of the
    level around its trend. A run of up to ``DROP_MAX_SAMPLES`` falling samples
    counts as one drop: sampling can catch a collection half-way.
    """
    changes = np.diff(v)
    if changes.size < 8:
        return None
    # Correlated noise drifts further over several samples than over one, so the
    # yardstick is the change over as many samples as a drop may take.
    lagged = v[DROP_MAX_SAMPLES:] - v[:-DROP_MAX_SAMPLES]
    step_scale = robust_spread(lagged) or float(np.mean(np.abs(lagged)))
    threshold = max(DROP_SIGMAS * step_scale, DROP_SPREADS * robust_spread(residuals(t, v, per_h)))
    falling = np.concatenate(([0], (changes < 0).astype(np.int8), [0]))
    edges = np.diff(falling)
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    short = (stops - starts) <= DROP_MAX_SAMPLES
    height = v[starts] - v[stops]
    bottoms = stops[short & (height > threshold)]
    if bottoms.size < MIN_DROPS:
        return None
    return Sawtooth(t[bottoms].astype(np.float64), v[bottoms].astype(np.float64))


def reclaimable(t: FloatArray, v: FloatArray, saw: Sawtooth) -> float:
    """Mean height of ``v`` above the floor interpolated between drop bottoms."""
    floor = np.interp(t, saw.floor_t, saw.floor_v)
    return float(np.mean(np.maximum(v - floor, 0.0)))


def find_step(t: FloatArray, v: FloatArray) -> Step | None:
    """A single level change that explains ``v`` far better than a straight line.

    Compares the residual sum of squares of a two-mean model (best split in the
    middle 80%) with that of a line, on block means. A ramp never qualifies:
    against a line, two means fit a ramp worse, not better.
    """
    tb, vb = block_means(t, v)
    m = vb.size
    if m < STEP_MIN_POINTS or np.ptp(vb) == 0:
        return None
    fit = np.polyfit(tb - tb[0], vb, 1)
    line_sse = float(np.sum((vb - np.polyval(fit, tb - tb[0])) ** 2))
    split, step_sse = _best_split(vb, lo=max(3, m // 10), hi=m - max(3, m // 10))
    if not step_sse < STEP_SSE_RATIO * line_sse:
        return None
    height = float(vb[split:].mean() - vb[:split].mean())
    # A jump happens between neighbouring points (two, if it fell inside a block);
    # a fast ramp into a plateau fits two means too, but rises over many points.
    jumps = np.abs(np.diff(vb[max(split - 2, 0) : split + 2]))
    if not jumps.max() >= STEP_ABRUPT * abs(height):
        return None
    return Step(at_s=_refine(t, v, tb[max(split - 2, 0)], tb[min(split + 1, m - 1)]), height=height)


def _refine(t: FloatArray, v: FloatArray, lo_s: float, hi_s: float) -> float:
    """Time of the first raw sample after the jump, searched between two block means.

    Block means place the step only to within a block; samples from the wrong
    side of it would tilt the slope measured after the step.
    """
    first, last = np.searchsorted(t, [lo_s, hi_s])
    window = v[first : last + 1]
    if window.size < 2:
        return float(t[min(first, t.size - 1)])
    split, _ = _best_split(window, lo=1, hi=window.size - 1)
    return float(t[first + split])


def _best_split(vb: FloatArray, lo: int, hi: int) -> tuple[int, float]:
    """Split index minimising the two-segment SSE (cumulative sums: O(m))."""
    m = vb.size
    centred = vb - vb.mean()  # keeps the squared sums small: no cancellation
    csum, csq = np.cumsum(centred), np.cumsum(centred**2)
    splits = np.arange(lo, hi + 1)
    left_n, right_n = splits.astype(np.float64), (m - splits).astype(np.float64)
    left_sum, left_sq = csum[splits - 1], csq[splits - 1]
    right_sum, right_sq = csum[-1] - left_sum, csq[-1] - left_sq
    sse = (left_sq - left_sum**2 / left_n) + (right_sq - right_sum**2 / right_n)
    best = int(np.argmin(sse))
    return int(splits[best]), float(sse[best])


def level(v: FloatArray, sustain: int = SUSTAIN) -> Level:
    """Peak and sustained peak (max over windows of ``sustain`` samples of their min).

    A single spike is what a sampler sees when it reads mid-operation; a level
    budget is about where the gauge settles, so it is judged on the sustained one.
    With fewer than ``sustain`` samples nothing was held that long: the sustained
    value is NaN (a run stopped early, or the first prefixes time to detect tries,
    must not read two samples as "held for 3").
    """
    if v.size == 0:
        return Level(float("nan"), float("nan"), sustain)
    if v.size < sustain:
        return Level(float(v.max()), float("nan"), sustain)
    held = v[: v.size - sustain + 1].copy()
    for shift in range(1, sustain):
        np.minimum(held, v[shift : v.size - sustain + 1 + shift], out=held)
    return Level(float(v.max()), float(held.max()), sustain)
