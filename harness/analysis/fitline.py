"""The line each series was judged on, as ``summary.json`` stores it for plots.

The slope is the one the verdict was judged on (``Trend.judged``, see
:mod:`harness.analysis.trend`), over the samples it was fitted on: the whole
measured window, the last third, the part after a step, or the floor under a
sawtooth. The line's level is Theil–Sen's intercept (median of
``v - slope * t``) over those samples, so it sits where the judged samples
are. It is stored as the value at the middle of the window rather than at
``t = 0``: that is the point a plot pivots the interval's fan on, and it does
not drift far off the data on a long run.

Reports draw this line from the summary and never fit one themselves, so a
plot cannot disagree with the verdict it illustrates.
"""

from __future__ import annotations

import numpy as np

from harness.analysis.shapes import find_sawtooth
from harness.analysis.trend import TAIL_FRACTION, Trend
from harness.runfiles.rundata import FloatArray, clean
from harness.runfiles.summary_records import FittedLine


def fitted_line(t: FloatArray, v: FloatArray, trend: Trend, unit: str) -> FittedLine:
    """The judged line of ``trend``, found on the series ``t``, ``v`` it was found on.

    ``t`` and ``v`` are the samples up to the end of the analysed window (the
    warm-up may still be in them: ``trend.start_s`` cuts it).
    """
    t, v = clean(t, v)
    keep = t >= trend.start_s
    t, v = t[keep], v[keep]
    start = _fit_start(trend)
    slope = trend.judged
    fit_t, fit_v = _fitted_samples(t, v, trend, start)
    per_s = slope.per_h / 3600.0
    intercept = float(np.median(fit_v - per_s * fit_t))
    mid = (start + trend.end_s) / 2.0
    return FittedLine(
        basis=trend.basis,
        start_s=start,
        end_s=trend.end_s,
        analysed_from_s=trend.start_s,
        mid_value=intercept + per_s * mid,
        per_h=slope.per_h,
        ci=slope.ci,
        unit=unit,
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

