"""The sentences a run's reasons end with: the shapes found in its series, a run too short
to judge growth, and the smallest growth each signal could confirm.

Read from a :class:`harness.analysis.runview.RunView`; judging nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.analysis.runview import CALIBRATED, RESOLVED, RunView
from harness.analysis.trend import Trend
from harness.budgets import Budget
from harness.runfiles.rundata import Series
from harness.units import format_duration, format_rate

WARMUP_NOTE_FRACTION = 0.1  # say so when automatic warm-up hid this much of a window


def describe_shapes(view: RunView, names: Sequence[str]) -> list[str]:
    """Sentences about the shapes found in the named series, for the reasons list."""
    notes: list[str] = []
    for name in names:
        if name not in view.series or (trend := view.trend(name, view.end_s)) is None:
            continue
        unit = view.series[name].unit
        skipped = trend.start_s - view.start_s
        if skipped > WARMUP_NOTE_FRACTION * (view.end_s - view.start_s):
            notes.append(_warmup_note(name, view.series[name], view.start_s, trend))
        if trend.floor is not None:
            notes.append(
                f"{name}: sawtooth ({trend.drops} drops); judged on the floor under the drops, "
                f"{format_rate(trend.reclaimable, unit)} above it is taken and given back again "
                "(by collections or by the program), not kept."
            )
        if trend.step is not None and trend.basis == "after_step":
            notes.append(
                f"{name}: one step of {format_rate(trend.step.height, unit)} at "
                f"{trend.step.at_s:.0f} s, judged on the growth after it (a one-off cost)."
            )
        if trend.basis == "tail":
            change = "grew, then levelled off (plateau)" if trend.plateau else "sped up late"
            notes.append(f"{name}: {change}; judged on the last third.")
    return notes


def describe_short_run(view: RunView, budgets: Sequence[Budget]) -> list[str]:
    """One sentence when the run was too short for memory growth to convict: which
    budgets that holds for and how long a run must be to judge them."""
    why = view.too_short(view.end_s)
    names = list(dict.fromkeys(b.metric for b in budgets if b.kind == "rate" and b.metric
                               in CALIBRATED and view.allowance(b.metric, 1.0) is not None))
    if why is None or not names:
        return []
    return [f"short run: {why.replace(' judges it', ' judges them')}; until then growth of "
            f"{', '.join(names)} can make it suspicious, never a leak."]


def describe_resolution(view: RunView) -> list[str]:
    """One sentence: the smallest growth each byte and block signal can confirm in this run."""
    parts = []
    for name in RESOLVED:
        smallest = view.resolution(name)
        if smallest is not None:
            parts.append(f"{name} >= {format_rate(smallest, view.series[name].unit + '/h')}")
    if not parts:
        return []
    return [f"resolution: this run can confirm growth of {', '.join(parts)} (95%)."]


def _warmup_note(name: str, series: Series, start_s: float, trend: Trend) -> str:
    """What automatic warm-up detection skipped, and why: its rate against the rest's."""
    keep = (series.t >= start_s) & (series.t < trend.start_s)
    early = ""
    if np.count_nonzero(keep) >= 2:
        per_h = float(np.polyfit(series.t[keep], series.v[keep], 1)[0]) * 3600.0
        early = (
            f" (it moved at {format_rate(per_h, series.unit + '/h')}, outside the rest's 95% "
            f"interval of {format_rate(trend.overall.ci[0], series.unit + '/h')} to "
            f"{format_rate(trend.overall.ci[1], series.unit + '/h')}: a transient, not the trend)"
        )
    return (
        f"{name}: the first {format_duration(trend.start_s - start_s)} looked like warm-up "
        f"and was not measured{early}."
    )
