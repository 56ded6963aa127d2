"""``compare.png``: two runs on shared axes, one panel per quantity.

Panels: RSS (MB), objects the cyclic collector freed so far (a leak through
reference cycles climbs, a clean cache stays near zero), then up to
``MAX_GAUGES`` gauges both runs recorded, budgeted ones first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from reports.render.downsample import envelope
from reports.render.figure import COLOURS, TimeScale, corner_text, count_axis, new_figure, save
from reports.render.growth import describe_growth
from reports.render.series import cumulative_collected, span_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from harness.runfiles.rundata import Series
    from reports.compare.model import Side

MAX_GAUGES = 4


class Style(NamedTuple):
    colour: str
    dashes: str


def key_gauges(a: Side, b: Side) -> list[str]:
    """Gauges both runs recorded, those a budget judged (in either) first."""
    if a.run is None or b.run is None:
        return []
    shared = sorted(set(a.run.gauges) & set(b.run.gauges))
    budgeted = {name for side in (a, b) for name in shared
                if any(m.status for n, m in side.summary.metrics.items()
                       if n.startswith(f"{name}_"))}
    return sorted(shared, key=lambda n: (n not in budgeted, n))[:MAX_GAUGES]


def draw_comparison(a: Side, b: Side, path: Path) -> Path | None:
    """The figure, or None when neither run has samples."""
    runs = [(side, side.run) for side in (a, b) if side.run is not None]
    if not runs:
        return None
    spans = [span_of(run) for _, run in runs]
    scale = TimeScale.for_span(max(end for _, end in spans) - min(start for start, _ in spans))
    gauges = key_gauges(a, b)
    figure, panels = new_figure(rows=2 + len(gauges), row_height_in=2.4)
    for side, run in runs:
        # B dashed: where the two runs agree, both lines stay visible.
        style = Style(COLOURS[0] if side is a else COLOURS[1], "-" if side is a else "--")
        _line(panels[0], run.rss, scale, style, side.label, divisor=1e6)
        t, total = cumulative_collected(run.gc_events, run.garbage_windows)
        panels[1].step(scale(t), total, where="post", label=side.label, color=style.colour,
                       ls=style.dashes)
        for axes, name in zip(panels[2:], gauges, strict=True):
            _line(axes, run.gauges[name], scale, style, side.label)
    panels[0].set_ylabel("RSS (MB)")
    panels[0].set_title("RSS of the worker")
    panels[0].legend(loc="lower right", fontsize=9)
    growths = "\n".join(f"{s.label[:1]}: {describe_growth(s.growth)}" for s in (a, b))
    corner_text(panels[0], growths)
    panels[1].set_ylabel("objects (total)")
    panels[1].set_title("Objects freed by the cyclic collector so far")
    count_axis(panels[1])
    for axes, name in zip(panels[2:], gauges, strict=True):
        axes.set_title(f"gauge: {name}")
    for axes in panels:
        axes.grid(alpha=0.3)
    panels[-1].set_xlabel(scale.label)
    return save(figure, path)


def _line(
    axes: Axes, series: Series, scale: TimeScale, style: Style, label: str, divisor: float = 1.0
) -> None:
    if not len(series):
        return
    t, v = envelope(series.t, series.v)
    axes.plot(scale(t), v / divisor, lw=1.2, label=label, color=style.colour, ls=style.dashes)

