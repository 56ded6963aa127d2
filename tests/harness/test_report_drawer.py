"""Each cell's report is drawn while the others run, not after the last one."""

from __future__ import annotations

from pathlib import Path

from harness.parent.matrix import CellResult, plan
from harness.parent.runner import RunOutcome
from harness.runfiles.names import REPORT_FILE
from harness.runfiles.summary import load_summary
from leak_harness.cli.check_view import PlainView
from leak_harness.cli.report_drawer import ReportDrawer
from tests.harness.fixtures.scenarios import TOGGLE
from tests.reports.synth import write_run


def test_a_landed_cell_gets_its_report_in_the_background(tmp_path: Path) -> None:
    fixed, injected = plan([TOGGLE])
    rundirs = [write_run(tmp_path / name, "toggle", duration_s=60.0) for name in ("f", "i")]
    with ReportDrawer(PlainView([fixed, injected])) as drawer:
        for cell, rundir in zip((fixed, injected), rundirs, strict=True):
            drawer.landed(CellResult(cell, RunOutcome("pass", rundir, None,
                                                      load_summary(rundir))))
    # Leaving the block waits for the drawing: each report is there, drawn by the pool.
    assert [f.result() for f in drawer.pending] == [True, True]
    assert all((rundir / REPORT_FILE).exists() for rundir in rundirs)


def test_a_report_that_cannot_be_drawn_is_left_to_the_suite(tmp_path: Path) -> None:
    (cell,) = plan([TOGGLE], select="fixed")
    missing = tmp_path / "no-such-run"
    with ReportDrawer(PlainView([cell])) as drawer:
        # A summary was loaded before the folder went away: the drawing fails, quietly.
        rundir = write_run(tmp_path / "gone", "toggle", duration_s=60.0)
        outcome = RunOutcome("pass", missing, None, load_summary(rundir))
        drawer.landed(CellResult(cell, outcome))
    assert [f.result() for f in drawer.pending] == [False]
