"""``gauges.png``: one small panel per gauge the scenario registered.

Budgeted gauges come first and wear their budget status colour; a level
budget (``"work_list: <= 4"``) is drawn as a dashed line at its limit, and
the panel title carries the growth per hour when the summary measured one.
Gauges no budget judged that never moved share one line under the title
instead of a flat panel each (half the panels of an exit scenario).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from reports.render.downsample import envelope
from reports.render.figure import COLOURS, TimeScale, new_figure, save, shade_warmup, suptitle
from reports.render.numbers import format_growth
from reports.render.series import span_of
from reports.run.model import RunModel
from reports.run.plots import PLAIN, STATUS_COLOURS, status_colour

if TYPE_CHECKING:
    from matplotlib.axes import Axes

GAUGE_COLUMNS = 3


def gauges_plot(model: RunModel, path: Path) -> Path | None:
    """One small panel per gauge (budgeted ones first), with growth and level limit."""
    run = model.run
    names = gauge_order(model) if run is not None else []
    if run is None or not names:
        return None
    still = constant_gauges(model, names)
    names = [n for n in names if n not in still] or names[:1]
    title = (f"Gauges the scenario registered: {model.title}\n"
             "(dashed red: a level budget; title: growth per hour [95% interval])")
    if still:
        title += "\n" + constant_line(model, still)
    first, last = span_of(run)
    scale = TimeScale.for_span(last - first)
    columns = min(GAUGE_COLUMNS, len(names))
    rows = math.ceil(len(names) / columns)
    figure, panels = new_figure(rows, columns, row_height_in=2.1,
                                fixed_margins_title_in=0.2 * title.count("\n") + 0.3)
    for index, axes in enumerate(panels):
        if index >= len(names):
            axes.set_visible(False)
            continue
        _gauge_panel(axes, model, names[index], scale)
        shade_warmup(axes, scale, first, model.warmup_s, None)
        if index >= len(names) - columns:
            axes.set_xlabel(scale.label)
            axes.tick_params(labelbottom=True)
    suptitle(figure, title)
    return save(figure, path)


def gauge_order(model: RunModel) -> list[str]:
    """Gauge names with samples: those a budget judged first, then by name."""
    assert model.run is not None
    names = sorted(n for n, s in model.run.gauges.items() if len(s))
    judged = [n for n in names if status_colour(model, n) != PLAIN]
    return [*judged, *(n for n in names if n not in judged)]


def constant_gauges(model: RunModel, names: list[str]) -> list[str]:
    """Gauges no budget judged whose every sample has the same value."""
    assert model.run is not None
    return [n for n in names if status_colour(model, n) == PLAIN
            and float(model.run.gauges[n].v.min()) == float(model.run.gauges[n].v.max())]


def constant_line(model: RunModel, names: list[str]) -> str:
    """``constant: a=0, b=0, c=4`` wrapped to the figure's width."""
    assert model.run is not None
    words = [f"{n}={float(model.run.gauges[n].v[0]):g}" for n in names]
    text = "constant throughout: " + ", ".join(words)
    return "\n".join(textwrap.wrap(text, width=105))


def _gauge_panel(axes: Axes, model: RunModel, name: str, scale: TimeScale) -> None:
    assert model.run is not None
    series = model.run.gauges[name]
    t, v = envelope(series.t, series.v)
    axes.plot(scale(t), v, color=COLOURS[0], lw=1.0)
    limit = model.summary.level_limit(name)
    if limit is not None:
        axes.axhline(limit, color=STATUS_COLOURS["leak"], ls="--", lw=1.0)
    metric = model.summary.metrics.get(f"{name}_growth")
    title = name
    if metric is not None and math.isfinite(metric.value):
        # On a line of its own: beside the name it ran into the next panel's title.
        title += f"\n{format_growth(metric.value, metric.ci, metric.unit)}"
    axes.set_title(title, fontsize=9, color=status_colour(model, name))
    axes.ticklabel_format(axis="y", useOffset=False, style="plain")
    axes.grid(alpha=0.3)
