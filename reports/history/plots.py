"""Per-scenario trend plots from the history: growth per hour over nights.

One PNG per scenario, one panel per column (fixed first, then each injected
regression): the judged RSS growth with its 95% interval as an error bar,
markers coloured by verdict, and on the fixed panel the noise band that
:mod:`harness.history.flags` judges the latest run against.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.history.db import Trend, trends
from harness.history.flags import FLOOR_PER_H, MIN_HISTORY, K, check_latest, noise_band
from reports.render.figure import new_figure, save
from reports.render.html import VERDICT_COLOURS
from reports.render.numbers import display_unit, slug

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def write_trend_plots(db: Path, out_dir: Path, nights: int = 30) -> list[Path]:
    """Write ``trend-<scenario>.png`` for every scenario in ``db``; return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_scenario: dict[str, list[Trend]] = {}
    for trend in trends(db, None, nights):
        by_scenario.setdefault(trend.scenario, []).append(trend)
    return [
        _scenario_plot(name, series, out_dir / f"trend-{slug(name)}.png")
        for name, series in sorted(by_scenario.items())
    ]


def _scenario_plot(scenario: str, series: list[Trend], path: Path) -> Path:
    # Not shared: each column has its own runs (an injection may run on fewer nights).
    figure, panels = new_figure(rows=len(series), row_height_in=2.8, sharex=False)
    for axes, trend in zip(panels, series, strict=True):
        _trend_panel(axes, trend)
    panels[-1].set_xlabel("run (date and commit)")
    figure.suptitle(f"RSS growth per hour over recent runs: {scenario}")
    return save(figure, path)


def _trend_panel(axes: Axes, trend: Trend) -> None:
    points = [p for p in trend.points if p.growth_per_h is not None]
    axes.set_title(trend.column, fontsize=10)
    x = np.arange(len(trend.points))
    axes.set_xticks(x, [f"{p.recorded_at:%m-%d}\n{(p.commit or '')[:7]}" for p in trend.points],
                    fontsize=8)
    axes.tick_params(labelbottom=True)
    if not points:
        axes.text(0.5, 0.5, "no growth measured in these runs", transform=axes.transAxes,
                  ha="center", color="#57606a")
        return
    magnitude = max(abs(p.growth_per_h or 0.0) for p in points)
    scale, unit = display_unit("B/h", max(magnitude, 1e6))
    if not trend.injected:
        _noise_band(axes, trend, scale)
        _mark_flag(axes, trend, scale)
    for index, point in enumerate(trend.points):
        if point.growth_per_h is None:
            continue
        value = point.growth_per_h / scale
        lo, hi = (c / scale for c in point.growth_ci) if point.growth_ci else (value, value)
        colour = VERDICT_COLOURS.get(point.verdict, "#57606a")
        axes.errorbar([index], [value], yerr=[[value - lo], [hi - value]], fmt="o",
                      color=colour, ecolor="#57606a", capsize=3, ms=6)
    _verdict_legend(axes, {p.verdict for p in trend.points})
    axes.axhline(0, color="#57606a", lw=0.8)
    axes.set_ylabel(f"RSS growth ({unit})")
    axes.grid(alpha=0.3)


def _noise_band(axes: Axes, trend: Trend, scale: float) -> None:
    """The band the latest run is judged against: from the runs before it."""
    previous = [p.growth_per_h for p in trend.points[:-1] if p.growth_per_h is not None]
    if len(previous) < MIN_HISTORY:
        return
    band = noise_band(previous, K, FLOOR_PER_H)
    axes.axhspan(band.low / scale, band.high / scale, color="#9aa0a6", alpha=0.2, lw=0,
                 label="usual: median ± noise of earlier runs")


def _mark_flag(axes: Axes, trend: Trend, scale: float) -> None:
    """Ring the latest run when the noise-band rule flags it."""
    flag = check_latest(trend)
    if flag is None or flag.latest.growth_per_h is None:
        return
    axes.plot([len(trend.points) - 1], [flag.latest.growth_per_h / scale], "o", ms=16, mfc="none",
              mec=VERDICT_COLOURS["leak"], mew=2, label="flagged: outside the usual band")


def _verdict_legend(axes: Axes, verdicts: set[str]) -> None:
    for verdict in sorted(verdicts):
        axes.plot([], [], "o", color=VERDICT_COLOURS.get(verdict, "#57606a"), label=verdict)
    axes.legend(loc="upper left", fontsize=8, ncols=4)
