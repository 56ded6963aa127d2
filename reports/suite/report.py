"""``write_suite_report(suite, out)``: the detection matrix of a judged suite of runs.

Rows are scenarios, columns ``fixed`` and each injected regression. The suite
comes judged (:func:`harness.suite.judge_suite`: which cells are right, and
why the others are wrong), its summaries already read; this module renders it
and returns the paths it wrote. It judges nothing and decides no exit code; the
only run folders it opens are those of cells without a ``report.html``, to draw
one, as ``leak-harness report <rundir>`` would.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import suppress
from multiprocessing import get_context
from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.names import REPORT_FILE, SUITE_INDEX
from harness.runfiles.reader import open_run
from harness.runfiles.summary import Upgrade
from harness.suite import CellOutcome, Suite
from reports.run.report import write_run_report
from reports.suite.model import SuitePaths
from reports.suite.outputs import render_index, render_junit, render_text

INDEX_FILE, JUNIT_FILE, TEXT_FILE = SUITE_INDEX, "junit.xml", "summary.txt"
MIN_PARALLEL_REPORTS = 6  # fewer are drawn in this process: starting workers costs ~2 s


def write_suite_report(
    suite: Suite,
    out: Path,
    *,
    write_missing_reports: bool = True,
    not_applicable: Sequence[str] = (),
    upgrade: Upgrade | None = None,
    flagged: Sequence[str] = (),
) -> SuitePaths:
    """Write ``index.html``, ``junit.xml`` and ``summary.txt`` into ``out``; return their paths.

    ``write_missing_reports`` writes a run's ``report.html`` first when it has
    none, so every cell links somewhere. ``not_applicable``: ``"scenario[column]:
    why"`` sentences on cells that were not run (injections a user's cache cannot
    take, cells an interrupted check never started). ``upgrade``: how the face
    brings an older summary up to date for a missing run report
    (:func:`harness.analysis.upgrade.upgrade`). ``flagged``: the history's
    regression flags, shown first on the index.
    """
    cells = suite.cells
    if write_missing_reports:
        _write_missing_reports(cells, upgrade)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index, junit, summary = out / INDEX_FILE, out / JUNIT_FILE, out / TEXT_FILE
    index.write_text(render_index(cells, out, not_applicable, flagged), encoding="utf-8")
    junit.write_bytes(render_junit(cells, not_applicable))
    summary.write_text(render_text(cells), encoding="utf-8")
    return SuitePaths(index, junit, summary)


def _write_missing_reports(cells: Sequence[CellOutcome], upgrade: Upgrade | None) -> None:
    """Each missing run report of a cell with a summary, on every core: the cells are
    done, the machine is free (a suite of 30 cells spent 85 s drawing them one after
    another)."""
    missing = [cell.rundir for cell in cells if cell.summary is not None
               and not (cell.rundir / REPORT_FILE).exists()]
    workers = min(len(missing), os.cpu_count() or 1)
    if workers <= 1 or len(missing) < MIN_PARALLEL_REPORTS:
        for rundir in missing:
            _report_one(rundir, upgrade)
        return
    # spawn, not fork: the parent may still hold threads (the matrix's pool, a live view)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        list(pool.map(_report_one, missing, [upgrade] * len(missing)))


def _report_one(rundir: Path, upgrade: Upgrade | None) -> None:
    with suppress(UsageError):  # the matrix still shows the cell; its link says it is missing
        write_run_report(open_run(rundir))
