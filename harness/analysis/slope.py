"""A robust slope with an interval that stays honest when samples are correlated.

Memory samples taken at 10 Hz are not independent: RSS wanders (allocator
arenas, a cache breathing) on time scales of seconds to minutes, so a textbook
interval that treats 864,000 samples as 864,000 facts is far too narrow and
calls every wobble a leak. The recipe here:

1. thin to at most ``MAX_POINTS`` time-block means (O(n), bounded cost later);
2. Theil–Sen slope of the block means (median of pairwise slopes: a few
   outliers cannot move it);
3. Sen's interval and the Mann–Kendall test from the variance of Kendall's S,
   inflated by the AR(1) factor ``(1 + r) / (1 - r)`` of the residuals (the
   effective-sample-size correction of Hamed & Rao 1998 / Yue & Wang 2004,
   with ``r`` bias-corrected and a Student-t quantile on the effective n).

Times are seconds, slopes are returned per hour in the series' unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.rundata import FloatArray

MAX_POINTS = 256  # 32,640 pairwise slopes: well under a millisecond to sort
MAX_R = 0.98  # beyond this the series is one slow wander; the factor caps at 99
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Slope:
    """Growth of a series in its unit per hour, with a 95% interval and a trend test."""

    per_h: float
    ci: tuple[float, float]
    p_value: float  # two-sided Mann–Kendall, autocorrelation-corrected
    n: int  # points the slope was fitted on (after thinning)
    n_eff: float  # what those points are worth once correlation is accounted for

    @property
    def significant(self) -> bool:
        return self.p_value < 1 - CONFIDENCE


def block_means(
    t: FloatArray, v: FloatArray, max_points: int = MAX_POINTS
) -> tuple[FloatArray, FloatArray]:
    """Means of ``t`` and ``v`` over equal-time blocks, at most ``max_points`` of them.

    Equal-time (not equal-count) blocks keep a burst of fast samples from
    dominating; empty blocks are dropped. Short series come back unchanged.
    """
    if t.size <= max_points:
        return t.astype(np.float64), v.astype(np.float64)
    edges = np.linspace(t[0], t[-1], max_points + 1)
    index = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, max_points - 1)
    counts = np.bincount(index, minlength=max_points).astype(np.float64)
    sum_t = np.bincount(index, weights=t, minlength=max_points)
    sum_v = np.bincount(index, weights=v, minlength=max_points)
    full = counts > 0
    return sum_t[full] / counts[full], sum_v[full] / counts[full]


def sen_slope(t: FloatArray, v: FloatArray) -> Slope | None:
    """Theil–Sen slope per hour of ``v`` over ``t`` (s); None below 3 distinct times."""
    tb, vb = block_means(t, v)
    i, j = np.triu_indices(tb.size, k=1)
    dt = tb[j] - tb[i]
    keep = dt > 0
    if np.count_nonzero(keep) < 3:
        return None
    dv = vb[j][keep] - vb[i][keep]
    slopes = np.sort(dv / dt[keep])
    per_s = float(np.median(slopes))
    factor, n_eff = _inflation(tb, vb, per_s)
    var_s = _kendall_var(vb) * factor
    return Slope(
        per_h=per_s * 3600.0,
        ci=_sen_interval(slopes, var_s, n_eff),
        p_value=_mann_kendall_p(float(np.sign(dv).sum()), var_s, n_eff),
        n=int(tb.size),
        n_eff=n_eff,
    )


def residuals(t: FloatArray, v: FloatArray, per_h: float) -> FloatArray:
    """``v`` minus its Theil–Sen line (intercept: median of ``v - slope*t``)."""
    shifted = v - (per_h / 3600.0) * t
    result: FloatArray = shifted - np.median(shifted)
    return result


def robust_spread(values: FloatArray) -> float:
    """Standard deviation estimated from the median absolute deviation (1.4826 MAD)."""
    if values.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(values - np.median(values))))


def _inflation(tb: FloatArray, vb: FloatArray, per_s: float) -> tuple[float, float]:
    """Variance inflation ``(1+r)/(1-r)`` and effective n from lag-1 residual correlation."""
    n = tb.size
    r = _lag1(residuals(tb, vb, per_s * 3600.0))
    # The lag-1 estimate is biased low by about (1 + 4r)/n on short series;
    # negative r would narrow the interval, which we never do on a guess.
    r = min(max(r + (1 + 4 * r) / n, 0.0), MAX_R)
    factor = (1 + r) / (1 - r)
    return factor, max(n / factor, 3.0)


def _lag1(r: FloatArray) -> float:
    centred = r - r.mean()
    denominator = float(np.dot(centred, centred))
    if denominator == 0.0:
        return 0.0
    return float(np.dot(centred[:-1], centred[1:]) / denominator)


def _kendall_var(v: FloatArray) -> float:
    """Variance of Kendall's S under no trend, with the correction for tied values."""
    n = v.size
    _, ties = np.unique(v, return_counts=True)
    ties = ties[ties > 1].astype(np.float64)
    tied = float(np.sum(ties * (ties - 1) * (2 * ties + 5)))
    return (n * (n - 1) * (2 * n + 5) - tied) / 18.0


def _sen_interval(slopes: FloatArray, var_s: float, n_eff: float) -> tuple[float, float]:
    # Ranks (N - C)/2 and (N + C)/2 of the sorted slopes, C = q * sqrt(Var S);
    # a Student-t quantile on the effective n keeps small samples honest.
    quantile = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df=max(n_eff - 2.0, 1.0)))
    c = quantile * math.sqrt(max(var_s, 0.0))
    count = slopes.size
    lo = int(np.clip(math.floor((count - c) / 2.0), 0, count - 1))
    hi = int(np.clip(math.ceil((count + c) / 2.0), 0, count - 1))
    return float(slopes[lo]) * 3600.0, float(slopes[hi]) * 3600.0


def _mann_kendall_p(s: float, var_s: float, n_eff: float) -> float:
    if var_s <= 0.0 or s == 0.0:
        return 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var_s)  # continuity-corrected
    return float(2.0 * stats.t.sf(abs(z), df=max(n_eff - 2.0, 1.0)))
