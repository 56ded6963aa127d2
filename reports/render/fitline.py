"""The fitted growth line a memory plot draws, and the band of its 95% interval.

The line is the one the verdict was judged on, read from ``summary.json``
(per series: :meth:`harness.runfiles.summary.Summary.fitted_line`).
Reports never fit a line themselves, so a plot cannot disagree with its
verdict, whatever the analysis code does after the run.

The band shows the slope's interval as a fan pivoting at the middle of the
window: lines with the low and the high slope through the fitted midpoint.
It says how fast the series may grow, not where each sample may fall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.basis import BASIS_WORDS
from harness.runfiles.rundata import FloatArray
from harness.runfiles.summary import Summary
from harness.runfiles.summary_records import FittedLine

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

    @classmethod
    def from_fitted(cls, fit: FittedLine) -> FitLine | None:
        """The line a summary stores; None when a number it needs is not finite."""
        numbers = (fit.start_s, fit.end_s, fit.mid_value, fit.per_h, fit.analysed_from_s)
        if not all(map(math.isfinite, numbers)):
            return None
        low, high = fit.ci
        # A bound the analysis could not give (stored as null) collapses onto the line.
        interval = (low if math.isfinite(low) else fit.per_h,
                    high if math.isfinite(high) else fit.per_h)
        return cls(fit.start_s, fit.end_s, fit.mid_value, fit.per_h, interval, fit.basis,
                   fit.analysed_from_s)

    def ends(self) -> FloatArray:
        """The span the line was fitted on, ``[start_s, end_s]``: a tail's or an
        after-step line drawn back to the warm-up's end would sit under samples it
        never described (the whole window's earlier, slower growth)."""
        return np.asarray([self.start_s, self.end_s], dtype=float)

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


def stored_fit(summary: Summary, series: str = "rss") -> FitLine | None:
    """The judged line of ``series`` from the summary, or None when it stores none."""
    fit = summary.fitted_line(series)
    return FitLine.from_fitted(fit) if fit is not None else None

