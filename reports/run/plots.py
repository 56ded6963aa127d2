"""The memory, gc and garbage plots of a run report (gauges: :mod:`reports.run.gauge_plots`).

Each returns its path, or None when it has nothing to draw.

Every plot has a title, axis labels with units and a legend, so it reads on
its own (pasted into an issue, say). Series are downsampled for drawing only
(:mod:`reports.render.downsample`); numbers written on plots come from the analysis.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from reports.render.downsample import envelope
from reports.render.figure import (
    COLOURS,
    TimeScale,
    corner_text,
    count_axis,
    legend_outside,
    new_figure,
    save,
    shade_warmup,
)
from reports.render.numbers import display_unit, format_growth, sig
from reports.render.series import span_of
from reports.run.model import RunModel
from reports.run.plotdata import OTHER, garbage_stack, gc_totals

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from harness.runfiles.rundata import FloatArray, RunData
    from reports.render.fitline import FitLine

# Events that move memory by themselves, so a reader does not take them for the workload.
MARKED_EVENTS = {
    "malloc_trim": ("malloc_trim probe", "#57606a"),
    "crash": ("crash", "#82071e"),
    "truncated": ("samples cut off", "#8250df"),
    "corrupt_line": ("unreadable sample line skipped", "#8250df"),
}
# The longest one-line title measured to fit over a panel beside its legend: the
# injected cells' (81, unified-pp-sync's) fit, a target's 84 did not.
TITLE_CHARS = 81
STATUS_COLOURS = {"pass": "#1a7f37", "suspicious": "#9a6700", "leak": "#cf222e", "error": "#57606a"}
PLAIN = "#24292f"
OTHER_COLOUR = "#c0c4c8"


def rss_plot(model: RunModel, path: Path) -> Path | None:
    """RSS and USS over time, the judged growth line, its interval and warm-up."""
    run = model.run
    if run is None or not len(run.rss):
        return None
    first, last = span_of(run)
    scale = TimeScale.for_span(last - first)
    divisor, unit = display_unit("B", float(np.nanmax(run.rss.v)))
    unit = "MB" if unit in ("B", "KB") else unit  # a process is never under 1 MB for long
    divisor = 1e6 if unit == "MB" else divisor
    figure, (axes,) = new_figure(row_height_in=4.2)
    for series, name, colour in ((run.rss, "RSS", COLOURS[0]), (run.uss, "USS", COLOURS[1])):
        if len(series):
            t, v = envelope(series.t, series.v)
            axes.plot(scale(t), v / divisor, color=colour, lw=1.0, label=name)
    fit = model.rss_fit
    shade_warmup(axes, scale, first, model.warmup_s, fit.analysed_from_s if fit else None)
    if fit is not None:
        draw_fit(axes, fit, scale, divisor)
        corner_text(axes, f"RSS {format_growth(fit.per_h, fit.ci, 'B/h')}",
                    status_colour(model, "rss"))
    mark_events(axes, run, scale)
    axes.set_title(plot_title("Memory of the worker", model.title))
    axes.set_xlabel(scale.label)
    axes.set_ylabel(f"memory ({unit})")
    legend_outside(axes, fontsize=9)
    axes.grid(alpha=0.3)
    return save(figure, path)


def plot_title(what: str, title: str) -> str:
    """``what: title`` on one line, or on two when longer than ``TITLE_CHARS``: a run on a
    ``--target`` names it (a module path), and centred over a panel that shares the
    figure with its legend, one line ran off the figure's left edge."""
    line = f"{what}: {title}"
    return line if len(line) <= TITLE_CHARS else f"{what}:\n{title}"


def draw_fit(axes: Axes, fit: FitLine, scale: TimeScale, divisor: float) -> FloatArray:
    """The judged line over the span it was fitted on (dashed) and the fan of its slope's
    95% interval; returns the line's two ends (s)."""
    band_t, low, high = fit.band()
    axes.fill_between(scale(band_t), low / divisor, high / divisor, color=COLOURS[4],
                      alpha=0.15, lw=0, label="95% interval of the growth")
    ends = fit.ends()
    axes.plot(scale(ends), fit.at(ends) / divisor, color=COLOURS[4], ls="--", lw=1.6,
              label=fit.label)
    return ends


def gc_plot(model: RunModel, path: Path) -> Path | None:
    """Gen-2 collections and objects freed by the collector, as running totals."""
    run = model.run
    totals = gc_totals(run.gc_events) if run is not None else None
    if run is None or totals is None:
        return None
    first, last = span_of(run)
    scale = TimeScale.for_span(last - first)
    span = last - first
    figure, (top, bottom) = new_figure(rows=2, row_height_in=2.6)
    if 2 in totals.t:
        rate = totals.per_min(2, totals.collections, span)
        top.step(*_to_end(scale, totals.t[2], totals.collections[2], last), where="post",
                 color=COLOURS[0],
                 label=f"gen-2 collections (average {sig(rate)} / min)")
    else:
        corner_text(top, "no gen-2 collection in this run")
    top.set_ylabel("collections so far")
    top.set_title(f"Garbage collector: {model.title}")
    for gen in totals.t:
        rate = totals.per_min(gen, totals.freed, span)
        bottom.step(*_to_end(scale, totals.t[gen], totals.freed[gen], last), where="post",
                    color=COLOURS[gen + 1], label=f"freed by gen {gen} ({sig(rate)} / min)")
    bottom.set_ylabel("objects freed so far")
    bottom.set_xlabel(scale.label)
    for axes in (top, bottom):
        shade_warmup(axes, scale, first, model.warmup_s, None)
        if axes.get_legend_handles_labels()[0]:
            # The "no gen-2 collection" note holds the upper left: keep clear of it.
            corner_taken = axes is top and 2 not in totals.t
            axes.legend(loc="upper right" if corner_taken else "upper left", fontsize=9)
        axes.grid(alpha=0.3)
        # All-zero data would get a 0..0.05 axis; 0..1 says "none" more plainly.
        axes.set_ylim(0, None if axes.get_ylim()[1] >= 1 else 1)
        count_axis(axes)
    return save(figure, path)


def _to_end(
    scale: TimeScale, t: FloatArray, total: FloatArray, end_s: float
) -> tuple[FloatArray, FloatArray]:
    """A running total held flat to the end of the run: nothing more happened."""
    return scale(np.append(t, max(end_s, float(t[-1])))), np.append(total, total[-1])


def garbage_plot(model: RunModel, path: Path) -> Path | None:
    """Cyclic garbage by type per garbage window; None when no window found any."""
    run = model.run
    stack = garbage_stack(run.garbage_windows) if run is not None else None
    if run is None or stack is None:
        return None
    first, last = span_of(run)
    scale = TimeScale.for_span(max(last, float(stack.t.max())) - first)
    figure, (axes,) = new_figure(row_height_in=3.6)
    x = scale(stack.t)
    gaps = np.diff(x)
    # One bar per window; a lone window gets a bar 2% of the run wide.
    span = max(scale.at(last - first), 1e-6)
    width = 0.7 * float(np.median(gaps)) if gaps.size else 0.02 * span
    bottom = np.zeros(stack.t.size)
    for row, name in enumerate(stack.types):
        colour = OTHER_COLOUR if name == OTHER else COLOURS[row % len(COLOURS)]
        axes.bar(x, stack.counts[row], width=width, bottom=bottom, color=colour, label=name)
        bottom += stack.counts[row]
    per_bar = f" (mean of {stack.merged} windows per bar)" if stack.merged > 1 else ""
    axes.set_title(f"Cyclic garbage by type, per garbage window{per_bar}: {model.title}")
    axes.set_xlim(scale.at(first) - width, max(scale.at(last), float(x.max())) + width)
    axes.set_xlabel(scale.label)
    axes.set_ylabel("garbage objects found")
    count_axis(axes)
    # Outside the axes: a stack of bars fills the corner a legend would sit in.
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, title="type")
    axes.grid(alpha=0.3, axis="y")
    return save(figure, path)


def mark_events(axes: Axes, run: RunData, scale: TimeScale) -> None:
    """Dotted vertical lines where the run did something that moves memory by itself."""
    labelled: set[str] = set()
    for event in run.events:
        marked = MARKED_EVENTS.get(str(event.get("name")))
        if marked is None or "t" not in event:
            continue
        label, colour = marked
        axes.axvline(scale.at(float(event["t"])), color=colour, ls=":", lw=1.4,
                     label=None if label in labelled else label)
        labelled.add(label)


def status_colour(model: RunModel, series: str) -> str:
    """The colour of the worst budget status on ``series``' metrics (black if none)."""
    statuses = [m.status for n, m in model.summary.metrics.items()
                if n.startswith(f"{series}_") or n == series]
    for status in ("leak", "error", "suspicious", "pass"):
        if status in statuses:
            return STATUS_COLOURS[status]
    return PLAIN
