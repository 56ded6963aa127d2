"""The plot a report leads with: every failing budget's series as it was judged.

One panel per failing budget: the samples, the judged line with its 95% band,
the budget (a line of the budget's slope through the fit's start for a rate,
the limit for a level), and what the analysis left out (warm-up, a transient
cut, the allocation windows whose samples judge nothing). Drawn from the run's
samples and the summary's stored line; nothing is fitted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.runfiles.rundata import Series, clean, ops_series, outside
from reports.render.downsample import envelope
from reports.render.figure import (
    COLOURS,
    WINDOW_COLOUR,
    WINDOW_HATCH,
    TimeScale,
    corner_text,
    count_axis,
    legend_outside,
    new_figure,
    save,
    shade_warmup,
)
from reports.render.judged import JudgedBudget, convicting
from reports.render.numbers import display_unit, format_growth
from reports.render.series import cumulative_collected, span_of
from reports.run.model import RunModel
from reports.run.plots import STATUS_COLOURS, draw_fit, mark_events, plot_title

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from harness.runfiles.rundata import RunData

MAX_PANELS = 4
BUDGET_COLOUR = STATUS_COLOURS["leak"]
GARBAGE = "cyclic_garbage"


def judged_plot(model: RunModel, path: Path) -> Path | None:
    """The failing budgets' series; None when nothing failed or no series was recorded."""
    run = model.run
    if run is None:
        return None
    panels = [(j, s) for j in convicting(model.judged)
              if (s := judged_series(run, j.series)) is not None][:MAX_PANELS]
    if not panels:
        return None
    first, last = span_of(run)
    scale = TimeScale.for_span(last - first)
    figure, axes_list = new_figure(rows=len(panels), row_height_in=3.4)
    for axes, (judged, series) in zip(axes_list, panels, strict=True):
        _panel(axes, model, judged, series, scale, first)
    axes_list[0].set_title(plot_title("What the verdict was judged on", model.title))
    axes_list[-1].set_xlabel(scale.label)
    return save(figure, path)


def judged_series(run: RunData, name: str) -> Series | None:
    """The recorded series a budget reads (garbage: the running total the collector
    freed); None when the run has none."""
    if name == GARBAGE:
        t, total = cumulative_collected(run.gc_events, run.garbage_windows)
        return Series(t, total, "") if t.size else None
    found = {"rss": run.rss, "uss": run.uss}.get(name) or run.memory.get(name) \
        or run.gauges.get(name)
    return found if found is not None and len(found) else None


def _panel(axes: Axes, model: RunModel, judged: JudgedBudget, series: Series,
           scale: TimeScale, first_s: float) -> None:
    run = model.run
    assert run is not None
    t, v = clean(series.t, series.v)
    is_bytes = judged.unit.startswith("B")
    divisor, unit = display_unit("B", float(np.max(np.abs(v)))) if is_bytes else (1.0, "")
    windows = run.traced_spans()
    kept = outside(t, windows)
    for end, amount in judged.taken_off:  # as judged: without what tracemalloc left
        v = np.where(t > end, v - amount, v)
    shown_t, shown_v = envelope(t[kept], v[kept])
    axes.plot(scale(shown_t), shown_v / divisor, color=COLOURS[0], lw=1.0,
              label=_series_label(judged))
    fit = judged.fit
    shade_warmup(axes, scale, first_s, model.warmup_s, fit.analysed_from_s if fit else None)
    _shade_windows(axes, scale, windows, float(t.max()))
    if fit is not None:
        ends = draw_fit(axes, fit, scale, divisor)
        budget = fit.at(ends[:1])[0] + judged.limit / 3600.0 * (ends - ends[0])
        axes.plot(scale(ends), budget / divisor, color=BUDGET_COLOUR, ls=":", lw=1.6,
                  label=f"budget {judged.text} (slope from the fit's start)")
        rate = format_growth(fit.per_h, fit.ci, judged.unit)
        # Over a short window the amount leads: the hourly rate is an extrapolation.
        badge = (f"{judged.amount()}; {rate}" if judged.amount_first()
                 else f"{rate}; {judged.amount()}")
        corner_text(axes, f"{judged.series} {badge}", STATUS_COLOURS.get(judged.status,
                                                                          "#24292f"))
    elif judged.kind == "level":
        axes.axhline(judged.limit / divisor, color=BUDGET_COLOUR, ls=":", lw=1.6,
                     label=f"budget {judged.text}")
    elif judged.unit.endswith("/kop"):
        _per_work_budget(axes, run, judged, (t, v / divisor), scale, model.warmup_s or first_s)
    mark_events(axes, run, scale)
    axes.set_ylabel(f"{judged.series} ({unit})" if unit else judged.series)
    if not is_bytes:
        count_axis(axes)
    legend_outside(axes)
    axes.grid(alpha=0.3)


def _per_work_budget(axes: Axes, run: RunData, judged: JudgedBudget,
                     drawn: tuple[np.ndarray, np.ndarray], scale: TimeScale,
                     from_s: float) -> None:
    """A per-work budget as the most the series may add for the work done since
    ``from_s``: ``limit`` per 1000 operations, from the series' level then."""
    ops = ops_series(run)
    t, v = drawn
    if len(ops) < 2 or not t.size:
        return
    after = ops.t >= from_s
    if not np.any(after):
        return
    base = float(np.interp(from_s, t, v))
    done = ops.v[after] - float(np.interp(from_s, ops.t, ops.v))
    axes.plot(scale(ops.t[after]), base + judged.limit / 1000.0 * done, color=BUDGET_COLOUR,
              ls=":", lw=1.6, label=f"budget {judged.text} (for the work done)")


def _series_label(judged: JudgedBudget) -> str:
    if judged.series == GARBAGE:
        return "cyclic garbage the collector freed, running total"
    return f"{judged.series} samples ({judged.status})"


def _shade_windows(axes: Axes, scale: TimeScale, spans: list[tuple[float, float]],
                   last_s: float) -> None:
    for index, (start, end) in enumerate(spans):
        axes.axvspan(scale.at(start), scale.at(min(end, last_s)), facecolor=WINDOW_COLOUR,
                     edgecolor=WINDOW_COLOUR, alpha=0.25, lw=0, hatch=WINDOW_HATCH,
                     label=None if index else "allocation window (its samples judge nothing)")
