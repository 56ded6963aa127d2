"""Per-scenario trend plots from the history: each judged budget over nights.

One PNG per scenario, one panel per column (fixed first, then each injected
regression). A panel draws every budget the runs were judged on as a share of
its limit (1: at the budget), so the signal that convicted a run shows where it
convicted it (a leak caught on garbage reads 40x its budget, not a flat RSS),
with the 95% interval as an error bar, filled markers where the budget failed;
on the fixed panel, the RSS noise band that :mod:`harness.history.flags` judges
the latest run against. Runs a version 1 history recorded have only their RSS
growth, drawn as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.history.db import Trend, trends
from harness.history.flags import FLOOR_PER_H, MIN_HISTORY, K, check_latest, noise_band
from reports.render.figure import COLOURS, new_figure, save
from reports.render.html import VERDICT_COLOURS
from reports.render.numbers import display_unit, slug

MAX_BUDGETS = 8  # per panel; the failing ones come first
FAILING_STATUSES = ("leak", "suspicious")

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
    figure.suptitle(f"Each budget over recent runs, as a share of its limit: {scenario}")
    return save(figure, path)


def _trend_panel(axes: Axes, trend: Trend) -> None:
    axes.set_title(trend.column, fontsize=10)
    x = np.arange(len(trend.points))
    axes.set_xticks(x, [f"{p.recorded_at:%m-%d}\n{(p.commit or '')[:7]}" for p in trend.points],
                    fontsize=8)
    axes.tick_params(labelbottom=True)
    if any(point.budgets for point in trend.points):
        _budget_panel(axes, trend)
    else:
        _rss_panel(axes, trend)


def _budget_panel(axes: Axes, trend: Trend) -> None:
    """Every budget as a share of its limit, one colour each, failing markers filled."""
    names = _budgets_in_order(trend)
    for colour, name in zip(COLOURS * 3, names[:MAX_BUDGETS], strict=False):
        for index, point in enumerate(trend.points):
            judged = next((b for b in point.budgets if b.budget == name), None)
            share = judged.share if judged is not None else None
            if judged is None or share is None:
                continue
            lo, hi = ((c / judged.limit for c in judged.ci) if judged.ci and judged.kind == "rate"
                      else (share, share))
            failing = judged.status in FAILING_STATUSES
            axes.errorbar([index], [share], yerr=[[max(share - lo, 0)], [max(hi - share, 0)]],
                          fmt="o", color=colour, ecolor=colour, capsize=3, ms=6,
                          mfc=colour if failing else "white", mew=1.5)
        axes.plot([], [], "o", color=colour, label=name)
    axes.axhline(1.0, color=VERDICT_COLOURS["leak"], ls=":", lw=1.4, label="at the budget")
    axes.axhline(0, color="#57606a", lw=0.8)
    if not trend.injected:
        _rss_band_as_share(axes, trend)
    zero = _failed_at_zero(trend)
    if zero:
        axes.text(0.99, 0.03, f"over a limit of 0: {zero}", transform=axes.transAxes,
                  ha="right", fontsize=8, color=VERDICT_COLOURS["leak"])
    axes.set_yscale("symlog", linthresh=0.1)
    axes.margins(y=0.2)  # the legend sits on top: keep the highest runs clear of it
    axes.set_ylabel("share of its budget")
    axes.legend(loc="upper left", fontsize=7, ncols=3)
    axes.grid(alpha=0.3)


def _budgets_in_order(trend: Trend) -> list[str]:
    """Budgets with a limit above 0, the ones that ever failed first (they are the story)."""
    seen: dict[str, bool] = {}
    for point in trend.points:
        for b in point.budgets:
            if b.limit > 0:
                seen[b.budget] = seen.get(b.budget, False) or b.status in FAILING_STATUSES
    return sorted(seen, key=lambda name: not seen[name])


def _failed_at_zero(trend: Trend) -> str:
    """Budgets of limit 0 that failed, with the runs they failed in (1 = oldest shown)."""
    failed: dict[str, list[str]] = {}
    for index, point in enumerate(trend.points):
        for b in point.budgets:
            if b.limit <= 0 and b.status in FAILING_STATUSES:
                failed.setdefault(b.series, []).append(str(index + 1))
    return "; ".join(f"{name} (run {', '.join(runs)})" for name, runs in failed.items())


def _rss_band_as_share(axes: Axes, trend: Trend) -> None:
    """The fixed panel's RSS noise band and flag, in shares of its RSS budget."""
    limits = [b.limit for p in trend.points for b in p.budgets
              if b.series == "rss" and b.kind == "rate" and b.limit > 0]
    if limits:
        _noise_band(axes, trend, limits[-1])
        _mark_flag(axes, trend, limits[-1])


def _rss_panel(axes: Axes, trend: Trend) -> None:
    """RSS growth alone: the runs a version 1 history recorded."""
    points = [p for p in trend.points if p.growth_per_h is not None]
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
                 label="RSS usual: median ± noise of earlier runs")


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
