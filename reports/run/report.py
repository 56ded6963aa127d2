"""``write_run_report(loaded, out)``: plots and ``report.html`` of a finished run.

Renders the run it is handed (summary and samples, read once by the caller);
never reads a result file, never runs anything. A run whose samples could not
be read (a worker that died before its header) still gets a page with the
summary's verdict and reasons.
"""

from __future__ import annotations

from pathlib import Path

from harness.runfiles.names import (
    GARBAGE_PLOT,
    GAUGES_PLOT,
    GC_PLOT,
    JUDGED_PLOT,
    REPORT_FILE,
    RSS_PLOT,
)
from harness.runfiles.reader import LoadedRun
from reports.run.gauge_plots import gauges_plot
from reports.run.judged_plot import judged_plot
from reports.run.model import RunModel, build_run_model
from reports.run.page import render_run_page
from reports.run.plots import garbage_plot, gc_plot, rss_plot

PLOT_FILES = {"judged": JUDGED_PLOT, "rss": RSS_PLOT, "gc": GC_PLOT, "garbage": GARBAGE_PLOT,
              "gauges": GAUGES_PLOT}


def write_run_report(loaded: LoadedRun, out: Path | None = None) -> Path:
    """Write ``judged.png``, ``rss.png``, ``gc.png``, ``garbage.png``, ``gauges.png`` and
    ``report.html`` into ``out`` (default: the run folder).

    ``loaded`` is the run as the caller read it (:func:`harness.runfiles.reader.open_run`)
    or as the runner handed it over: the report reads no result file itself.
    Plots with nothing to show are not written, and stale ones from an earlier
    report are removed. Returns the page's path.
    """
    out = Path(out) if out is not None else loaded.rundir
    model = build_run_model(loaded.rundir, loaded.samples, loaded.summary,
                            loaded.why_no_samples)
    plots = write_plots(model, out)
    path = out / REPORT_FILE
    path.write_text(render_run_page(model, plots), encoding="utf-8")
    return path


def write_plots(model: RunModel, out: Path) -> dict[str, Path | None]:
    """Each plot's path, or None where there was nothing to draw."""
    makers = {"judged": judged_plot, "rss": rss_plot, "gc": gc_plot, "garbage": garbage_plot,
              "gauges": gauges_plot}
    written: dict[str, Path | None] = {}
    for name, make in makers.items():
        target = out / PLOT_FILES[name]
        written[name] = make(model, target)
        if written[name] is None:
            target.unlink(missing_ok=True)  # an old plot would contradict the page
    return written

