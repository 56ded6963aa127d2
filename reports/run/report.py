"""``write_run_report(rundir)``: plots and ``report.html`` into a finished run folder.

Reads only the run's result files, through ``harness.runfiles``; never runs
anything. A run whose samples cannot be read (a worker that died before its
header) still gets a page with the summary's verdict and reasons.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.names import (
    GARBAGE_PLOT,
    GAUGES_PLOT,
    GC_PLOT,
    JUDGED_PLOT,
    REPORT_FILE,
    RSS_PLOT,
    SAMPLES_FILE,
)
from harness.runfiles.reader import load_samples
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import Summary, Upgrade, load_summary
from reports.run.gauge_plots import gauges_plot
from reports.run.judged_plot import judged_plot
from reports.run.model import RunModel, build_run_model
from reports.run.page import render_run_page
from reports.run.plots import garbage_plot, gc_plot, rss_plot

PLOT_FILES = {"judged": JUDGED_PLOT, "rss": RSS_PLOT, "gc": GC_PLOT, "garbage": GARBAGE_PLOT,
              "gauges": GAUGES_PLOT}


def write_run_report(
    rundir: Path, *, run: RunData | None = None, summary: Summary | None = None,
    upgrade: Upgrade | None = None,
) -> Path:
    """Write ``judged.png``, ``rss.png``, ``gc.png``, ``garbage.png``, ``gauges.png`` and
    ``report.html``.

    ``run`` and ``summary`` skip reading files a caller already loaded (the
    runner right after a run); ``upgrade`` is the face's way to bring an older
    summary up to date (see :func:`load_run_model`). Plots with nothing to show are not written,
    and stale ones from an earlier report are removed. Returns the page's path.
    Raises ``UsageError`` when ``summary.json`` is missing or unreadable.
    """
    rundir = Path(rundir)
    model = load_run_model(rundir, run=run, summary=summary, upgrade=upgrade)
    plots = write_plots(model, rundir)
    path = rundir / REPORT_FILE
    path.write_text(render_run_page(model, plots), encoding="utf-8")
    return path


def load_run_model(
    rundir: Path, *, run: RunData | None = None, summary: Summary | None = None,
    upgrade: Upgrade | None = None,
) -> RunModel:
    """What the report of ``rundir`` shows, from its files (or the ones given).

    A report only renders what the summary holds. An older summary lacks some
    of it (fitted lines, parsed limits), so faces pass ``upgrade``
    (:func:`harness.analysis.upgrade.upgrade`), which brings it up to date in
    memory from the samples; the file stays as it is. Without ``upgrade`` the
    summary is rendered as it is.
    """
    summary = summary if summary is not None else load_summary(rundir)
    load_error = None
    if run is None:
        run, load_error = _load_samples(rundir)
    if upgrade is not None:
        summary = upgrade(summary, run)
    return build_run_model(rundir, run, summary, load_error)


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


def _load_samples(rundir: Path) -> tuple[RunData | None, str | None]:
    try:
        return load_samples(rundir / SAMPLES_FILE), None
    except UsageError as exc:
        return None, exc.message
