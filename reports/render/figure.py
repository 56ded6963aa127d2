"""Figure plumbing shared by every plot: lazy matplotlib, time axes, shading, saving.

matplotlib is imported inside functions only, so ``import reports`` stays cheap
and nothing on the measuring path pays for it. Figures are built with
``matplotlib.figure.Figure`` directly instead of pyplot: no global figure
registry to leak figures into, no interactive backend to select, and PNG is
written by the Agg canvas that ``savefig`` picks for the format. (This is
matplotlib's own advice for rendering outside a GUI.) :func:`use_agg` is
there for callers that do want pyplot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reports.render.numbers import time_unit

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from harness.runfiles.rundata import FloatArray

DPI = 100
WIDTH_IN = 10.0  # 1000 px: the downsampling bucket count matches
WARMUP_COLOUR = "#9aa0a6"
# Allocation windows: amber and cross-hatched, so they never read as the grey warm-up.
WINDOW_COLOUR = "#e3a008"
WINDOW_HATCH = "xx"
COLOURS = ("#1f6feb", "#d4731c", "#2da44e", "#a371f7", "#cf222e", "#8c6d1f", "#0e8a9c", "#6e7781")


def use_agg() -> None:
    """Select the Agg backend before anyone imports pyplot (headless CI has no display)."""
    import matplotlib

    matplotlib.use("Agg")


def new_figure(
    rows: int = 1, cols: int = 1, row_height_in: float = 3.0, sharex: bool = True,
    fixed_margins_title_in: float | None = None,
) -> tuple[Figure, list[Axes]]:
    """A figure of ``rows`` x ``cols`` panels (sharing the x axis); panels in reading order.

    ``fixed_margins_title_in``: fixed margins, with that many inches on top for the
    title (:func:`suptitle`), instead of the constrained layout, which spends most of
    a report's time measuring every tick label of a grid of small panels.
    """
    from matplotlib.figure import Figure

    fixed = fixed_margins_title_in is not None
    title_in = fixed_margins_title_in or 0.0
    height = 0.6 + rows * row_height_in + title_in
    figure = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout=None if fixed else "constrained")
    if fixed:
        figure.subplots_adjust(left=0.08, right=0.98, bottom=0.45 / height,
                               top=1 - (0.45 + title_in) / height, hspace=0.75, wspace=0.32)
    grid = figure.subplots(rows, cols, sharex=sharex, squeeze=False)
    return figure, [axes for row in grid for axes in row]


def suptitle(figure: Figure, text: str) -> None:
    """The figure's title; with fixed margins, pinned 0.1 inch from the top edge."""
    if figure.get_layout_engine() is None:
        figure.suptitle(text, y=1 - 0.1 / figure.get_figheight(), va="top")
    else:
        figure.suptitle(text)


def save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=DPI)
    return path


@dataclass(frozen=True)
class TimeScale:
    """Seconds since start shown in seconds, minutes or hours, by the run's span."""

    divisor: float
    name: str

    @classmethod
    def for_span(cls, span_s: float) -> TimeScale:
        return cls(*time_unit(span_s))

    @property
    def label(self) -> str:
        return f"time since start ({self.name})"

    def __call__(self, t: FloatArray) -> FloatArray:
        scaled: FloatArray = t / self.divisor
        return scaled

    def at(self, seconds: float) -> float:
        return seconds / self.divisor


def shade_warmup(
    axes: Axes, scale: TimeScale, first_s: float, warmup_s: float | None, auto_s: float | None
) -> None:
    """Grey out what analysis skipped: the declared warm-up, then any automatic cut."""
    if warmup_s is not None and warmup_s > first_s:
        axes.axvspan(scale.at(first_s), scale.at(warmup_s), color=WARMUP_COLOUR, alpha=0.25,
                     lw=0, label="warm-up (not measured)")
    begin = max(first_s, warmup_s or first_s)
    if auto_s is not None and auto_s > begin:
        axes.axvspan(scale.at(begin), scale.at(auto_s), color=WARMUP_COLOUR, alpha=0.12, lw=0,
                     hatch="//", label="transient cut by analysis")


def legend_outside(axes: Axes, fontsize: float = 8) -> None:
    """The legend to the right of the panel, where it covers no sample (the end of a
    series, where a leak shows, is where a legend in a corner sits)."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                fontsize=fontsize)


def count_axis(axes: Axes) -> None:
    """Counts as 850, 12k, 1.5M on the y axis (never "50m" for 0.05: that reads as millions)."""
    from matplotlib.ticker import FuncFormatter

    def label(value: float, _: object) -> str:
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= scale:
                return f"{value / scale:g}{suffix}"
        return f"{value:g}"

    axes.yaxis.set_major_formatter(FuncFormatter(label))


def corner_text(axes: Axes, text: str, colour: str = "#24292f") -> None:
    """A boxed note in the upper-left corner (growth per hour, budget)."""
    axes.text(0.01, 0.97, text, transform=axes.transAxes, ha="left", va="top", fontsize=10,
              color=colour, bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "#d0d7de",
                                  "alpha": 0.9})
