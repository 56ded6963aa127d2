"""Named metrics with units: what ``summary.json`` lists and reports plot.

Metric names for a series ``p`` (``rss``, ``uss`` or a gauge name), unit ``u``
(``B`` for rss/uss, the gauge's unit, often empty):

- ``p_growth`` (u/h, CI): slope over the measured window, always;
- ``p_floor_growth`` (u/h, CI) and ``p_reclaimable`` (u): when a sawtooth was found;
- ``p_tail_growth`` (u/h, CI): when the last third levelled off or sped up;
- ``p_after_step_growth`` (u/h, CI) and ``p_step`` (u): when one step was found;
- ``p_max`` (u): highest sample after warm-up; ``p_noise`` (ratio): spread / growth;
- ``p_resolution`` (u/h): for rss, uss, heap, py_blocks and shmem, the smallest
  growth this run can confirm: half the judged slope's interval plus the
  calibrated growth of a healthy run over the same window
  (:mod:`harness.analysis.calibration`), and at least one page over the window
  for the series that move by pages (rss, uss, shmem).

A budget's ``budget`` and ``status`` go on the metric it was judged on. The record
itself, :class:`harness.runfiles.summary_records.Metric`, is the summary's.
"""

from __future__ import annotations

import math

from harness.analysis.shapes import Level
from harness.analysis.slope import Slope
from harness.analysis.trend import Trend
from harness.basis import BASIS_SUFFIX
from harness.runfiles.summary_records import Metric
from harness.units import format_rate


def slope_metric(slope: Slope, unit: str, note: str | None = None) -> Metric:
    return Metric(slope.per_h, f"{unit}/h", slope.ci, note=note)


def trend_metrics(prefix: str, trend: Trend, unit: str) -> dict[str, Metric]:
    """The series metrics listed in the module docstring, for one trend."""
    found = {f"{prefix}_growth": slope_metric(trend.overall, unit)}
    if trend.floor is not None:
        note = f"{trend.drops} drops; slope of their bottoms"
        found[f"{prefix}_floor_growth"] = slope_metric(trend.floor, unit, note)
        found[f"{prefix}_reclaimable"] = Metric(trend.reclaimable, unit, note="mean above floor")
    if (trend.plateau or trend.sped_up) and trend.tail is not None:
        found[f"{prefix}_tail_growth"] = slope_metric(trend.tail, unit, "last third")
    if trend.step is not None:
        at = f"at {trend.step.at_s:.1f} s"
        found[f"{prefix}_step"] = Metric(trend.step.height, unit, note=at)
        if trend.after_step is not None:
            found[f"{prefix}_after_step_growth"] = slope_metric(trend.after_step, unit)
    if trend.noise is not None:
        found[f"{prefix}_noise"] = Metric(trend.noise, "", note="spread / growth over the window")
    return found


def level_metric(prefix: str, held: Level, unit: str) -> dict[str, Metric]:
    note = (
        f"held {format_rate(held.sustained, unit)} for {held.held_for}+ samples"
        if math.isfinite(held.sustained)
        else f"fewer than {held.held_for} samples"
    )
    return {f"{prefix}_max": Metric(held.peak, unit, note=note)}


def judged_name(prefix: str, trend: Trend) -> str:
    """The metric a rate budget on this series is judged on."""
    return f"{prefix}_{BASIS_SUFFIX[trend.basis]}"

