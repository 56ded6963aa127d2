"""A robust slope with an interval that stays honest when samples are correlated.

Memory samples taken at 10 Hz are not independent: RSS wanders (allocator
arenas, a cache breathing) on time scales of seconds to minutes, so a textbook
interval that treats 864,000 samples as 864,000 facts is far too narrow and
calls every wobble a leak. The recipe here:

1. thin to at most ``MAX_POINTS`` time-block means (O(n), bounded cost later);
2. Theil–Sen slope of the block means (median of pairwise slopes: a few
   outliers cannot move it);
3. the interval from the size of the residuals around that line, with the
   effective sample size of AR(1) residuals (Santer et al. 2000, J. Geophys.
   Res. 105: ``n_eff = n (1 - r) / (1 + r)``, ``s_b^2 = sum(e^2) / (n_eff - 2)
   / Sxx``, a Student-t quantile on ``n_eff - 2``), ``r`` bias-corrected;
   when the residuals are as correlated as a random walk's (``r >= WANDER_R``:
   a climb in bursts, a wandering level), the stationary model has nothing
   left and the interval comes from the increments instead (a random walk
   with drift, see :func:`_drift_half`);
4. never wider than the range of the pairwise slopes (a monotone climb keeps
   a lower bound above zero even when both noise models give up);
5. the Mann–Kendall test from the variance of Kendall's S, inflated by the
   same AR(1) factor (Hamed & Rao 1998 / Yue & Wang 2004).

Why not Sen's rank interval (used before): it picks two of the sorted
pairwise slopes by rank, and when correlation pushes the rank offset to the
ends (few effective points, as in a run of seconds: ``n_eff`` at its floor
of 3, a t quantile of 12.7), it returns the steepest and the flattest slope
between neighbouring samples: a page-quantised RSS step, or one drop between
two samples, divided by 0.1 s. A steady 55 GB/h climb followed by the
malloc_trim probe's drop got -296 to +55 GB/h that way (a real 3 s run:
-958 to +63 GB/h). An interval built on the residuals' size is narrow when the data
is clean and wide when it is noisy, whatever the correlation.

Times are seconds, slopes are returned per hour in the series' unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.runfiles.rundata import FloatArray

MAX_POINTS = 256  # 32,640 pairwise slopes: well under a millisecond to sort
MAX_R = 0.98  # beyond this the series is one slow wander; the factor caps at 99
WANDER_R = 0.9  # residuals this correlated: judge the series as a random walk with drift
RANDOM_WALK_FIT = 1.2  # variance of a line through a random walk / of its mean increment
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Slope:
    """Growth of a series in its unit per hour, with a 95% interval and a trend test."""

    per_h: float
    ci: tuple[float, float]
    p_value: float  # two-sided Mann–Kendall, autocorrelation-corrected
    n: int  # points the slope was fitted on (after thinning)
    n_eff: float  # what those points are worth once correlation is accounted for
    span_s: float = 0.0  # seconds between the first and the last raw sample fitted

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
    slopes = dv / dt[keep]
    per_s = float(np.median(slopes))
    r = _residual_r(tb, vb, per_s)
    factor, n_eff = _inflation(r, tb.size)
    var_s = _kendall_var(vb) * factor
    half = _drift_half(tb, vb) if r >= WANDER_R else _trend_half(tb, vb, per_s, n_eff)
    # Never wider than the slopes between the samples themselves: when both
    # models have given up (a climb of 145 MB in 0.7 s, every sample above the
    # one before, decelerating), the data still rules out a rate below its
    # flattest pair. This is where Sen's rank interval ends up, too.
    low, high = max(per_s - half, float(slopes.min())), min(per_s + half, float(slopes.max()))
    return Slope(
        per_h=per_s * 3600.0,
        ci=(low * 3600.0, high * 3600.0),
        p_value=_mann_kendall_p(float(np.sign(dv).sum()), var_s, n_eff),
        n=int(tb.size),
        n_eff=n_eff,
        span_s=float(t[-1] - t[0]),
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


def _residual_r(tb: FloatArray, vb: FloatArray, per_s: float) -> float:
    """Lag-1 correlation of the residuals, corrected for its small-sample bias.

    The estimate is biased low by about ``(1 + 4r) / n`` on short series
    (:func:`_corrected`); negative r would narrow the interval, which we never
    do on a guess.
    """
    return _corrected(_lag1(residuals(tb, vb, per_s * 3600.0)), tb.size)


def _corrected(r: float, n: int) -> float:
    return max(r + (1 + 4 * r) / n, 0.0)


def _inflation(r: float, n: int) -> tuple[float, float]:
    """Variance inflation ``(1+r)/(1-r)`` and effective n for lag-1 correlation ``r``."""
    r = min(r, MAX_R)
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


def _trend_half(tb: FloatArray, vb: FloatArray, per_s: float, n_eff: float) -> float:
    """Half-width (per s) of a line plus stationary AR(1) noise (Santer et al. 2000).

    ``sum(e^2) / (n_eff - 2)`` is the residual variance a series of ``n_eff``
    independent points would have; the spread is the plain root mean square, not a
    robust one, so spikes and bends widen the interval (the estimate stays robust).
    """
    e = residuals(tb, vb, per_s * 3600.0)
    e = e - e.mean()  # about the fitted line, whose intercept is the median's
    sxx = float(np.sum((tb - tb.mean()) ** 2))
    df = max(n_eff - 2.0, 1.0)
    return _quantile(df) * math.sqrt(float(np.dot(e, e)) / df / sxx)


def _drift_half(tb: FloatArray, vb: FloatArray) -> float:
    """Half-width (per s) of the drift of a random walk, from the increments.

    When the residuals around the line are correlated like a random walk's
    (a rate that wobbles, a steady climb in bursts), the stationary model
    has almost nothing left (n_eff of 1 or 2) and its interval says nothing.
    A series that grows by increments is a random walk with drift: the mean
    increment per second carries the rate, their spread its uncertainty, and
    a line fitted through a random walk has 6/5 of that variance (Durlauf &
    Phillips 1988, ``RANDOM_WALK_FIT``). Increments correlated among themselves (bursts spanning
    samples) inflate it by their own AR(1) factor.
    """
    dt, dv = np.diff(tb), np.diff(vb)
    dt, dv = dt[dt > 0], dv[dt > 0]  # samples sharing a time stamp carry no rate
    if dt.size < 3:
        return math.inf  # the caller keeps it within the pairwise slopes
    span = float(dt.sum())
    e = dv - dv.sum() / span * dt
    m = dt.size
    factor, m_eff = _inflation(_corrected(_lag1(e / np.sqrt(dt)), m), m)
    innovation = float(np.dot(e, e)) / span * m / max(m - 1, 1)  # variance per second
    variance = RANDOM_WALK_FIT * innovation / span * factor
    return _quantile(max(m_eff - 1.0, 1.0)) * math.sqrt(variance)


def _quantile(df: float) -> float:
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, df=df))


def _mann_kendall_p(s: float, var_s: float, n_eff: float) -> float:
    if var_s <= 0.0 or s == 0.0:
        return 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var_s)  # continuity-corrected
    return float(2.0 * stats.t.sf(abs(z), df=max(n_eff - 2.0, 1.0)))
