"""``write_suite_report(suite, out)``: the detection matrix of a judged suite of runs.

Rows are scenarios, columns ``fixed`` and each injected regression. The suite
comes judged (:func:`harness.suite.judge_suite`: which cells are right, and
why the others are wrong), its summaries already read; this module renders it
and returns the paths it wrote. It judges nothing, decides no exit code and opens
no run folder (the face draws a cell's missing run report first).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.runfiles.names import SUITE_INDEX
from harness.suite import Suite
from reports.suite.model import SuitePaths
from reports.suite.outputs import render_index, render_junit, render_text

INDEX_FILE, JUNIT_FILE, TEXT_FILE = SUITE_INDEX, "junit.xml", "summary.txt"


def write_suite_report(
    suite: Suite,
    out: Path,
    *,
    not_applicable: Sequence[str] = (),
    flagged: Sequence[str] = (),
) -> SuitePaths:
    """Write ``index.html``, ``junit.xml`` and ``summary.txt`` into ``out``; return their paths.

    ``not_applicable``: ``"scenario[column]:
    why"`` sentences on cells that were not run (injections a user's cache cannot
    take, cells an interrupted check never started). ``flagged``: the history's
    regression flags, shown first on the index.
    """
    cells = suite.cells
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index, junit, summary = out / INDEX_FILE, out / JUNIT_FILE, out / TEXT_FILE
    index.write_text(render_index(cells, out, not_applicable, flagged), encoding="utf-8")
    junit.write_bytes(render_junit(cells, not_applicable))
    summary.write_text(render_text(cells), encoding="utf-8")
    return SuitePaths(index, junit, summary)
