"""The fitted growth line a memory plot draws, and the band of its 95% interval.

The slope is the one the verdict was judged on (``Trend.judged``, see
``harness.analysis.trend``), drawn over the samples it was fitted on: the
whole measured window, the last third, the part after a step, or the floor
under a sawtooth. The intercept is Theil–Sen's (median of ``v - slope * t``)
over those samples, so the line sits where the judged samples are.

The band shows the slope's interval as a fan pivoting at the middle of the
window: lines with the low and the high slope through the fitted midpoint.
It says how fast the series may grow, not where each sample may fall.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.metrics import BASIS_WORDS
from harness.analysis.shapes import find_sawtooth
from harness.analysis.trend import TAIL_FRACTION, Trend, clean, growth
from harness.runfiles.rundata import FloatArray, Series

BAND_POINTS = 64


@dataclass(frozen=True)
class FitLine:
    """A straight line over ``[start_s, end_s]`` with its slope interval, per hour."""

    start_s: float
    end_s: float
    mid_v: float  # fitted value at the middle of the window
    per_h: float
    ci: tuple[float, float]
    basis: str  # ``Trend.basis``: all, floor, tail, after_step
    analysed_from_s: float  # first sample analysed, after any automatic warm-up cut

    @property
    def mid_s(self) -> float:
        return (self.start_s + self.end_s) / 2.0

    @property
    def label(self) -> str:
        return f"fit: {BASIS_WORDS.get(self.basis, 'growth')}"

    def at(self, t: FloatArray, per_h: float | None = None) -> FloatArray:
        slope = (self.per_h if per_h is None else per_h) / 3600.0
        line: FloatArray = self.mid_v + slope * (t - self.mid_s)
        return line

    def band(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Times, lower and upper edge of the slope interval's fan."""
        t = np.linspace(self.start_s, self.end_s, BAND_POINTS)
        low, high = self.at(t, self.ci[0]), self.at(t, self.ci[1])
        return t, np.minimum(low, high), np.maximum(low, high)


def fit_line(
    series: Series, warmup_s: float | None, end_s: float | None = None
) -> FitLine | None:
    """The judged growth line of ``series``, or None when too short to fit.

    ``end_s`` is where the workload stopped (``runview.workload_end``): the
    analysis judges nothing after it, so neither does the drawn line."""
    t, v = clean(series.t, series.v)
    if end_s is not None:
        t, v = t[t <= end_s], v[t <= end_s]
    trend = growth(t, v, warmup_s)
    if trend is None:
        return None
    keep = t >= trend.start_s
    t, v = t[keep], v[keep]
    start = _fit_start(trend)
    slope = trend.judged
    fit_t, fit_v = _fitted_samples(t, v, trend, start)
    per_s = slope.per_h / 3600.0
    intercept = float(np.median(fit_v - per_s * fit_t))
    mid = (start + trend.end_s) / 2.0
    return FitLine(
        start_s=start,
        end_s=trend.end_s,
        mid_v=intercept + per_s * mid,
        per_h=slope.per_h,
        ci=slope.ci,
        basis=trend.basis,
        analysed_from_s=trend.start_s,
    )


def _fit_start(trend: Trend) -> float:
    if trend.basis == "tail":
        return trend.end_s - TAIL_FRACTION * (trend.end_s - trend.start_s)
    if trend.basis == "after_step" and trend.step is not None:
        return trend.step.at_s
    return trend.start_s


def _fitted_samples(
    t: FloatArray, v: FloatArray, trend: Trend, start: float
) -> tuple[FloatArray, FloatArray]:
    """The samples the judged slope describes: the drop bottoms for a sawtooth."""
    if trend.basis == "floor":
        saw = find_sawtooth(t, v, trend.overall.per_h)
        if saw is not None:
            return saw.floor_t, saw.floor_v
    keep = t >= start
    return t[keep], v[keep]
