"""``write_suite_report(rundirs, out)``: the detection matrix of a suite of runs.

Rows are scenarios, columns ``fixed`` and each injected regression. A cell is
correct when the fixed code passed and an injected regression got a failing
verdict (``leak``, ``crashed``, ``hung``, ``ceiling``): the harness caught it.
``suspicious`` and ``error`` are wrong in both columns, since neither tells a
reader what happened. Run folders may come from several shards: the suite is
just the list, wherever the folders are.

An injected run that ended the way its scenario's fixed run also ended
(both ``crashed``, say, because the scenario cannot even import) is not a
detection: such a cell is wrong, with that said, whatever the verdict's kind.

``expected`` overrides what a cell should be, by key ``"<scenario>/<column>"``,
``"<column>"`` or ``"<scenario>"`` (most specific wins); values ``"pass"``,
``"fail"`` (any failing verdict) or one exact verdict such as ``"crashed"``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.facts import FIXED, column, column_of, detect_s
from harness.runfiles.names import CONFIG_FILE, REPORT_FILE, SUITE_INDEX, SUMMARY_FILE
from harness.runfiles.reader import open_run
from harness.runfiles.summary import Upgrade, load_summary
from harness.verdicts import PROCESS_VERDICTS, VERDICTS
from reports.run.judged import convicting_signal
from reports.run.report import write_run_report
from reports.suite.model import Cell
from reports.suite.outputs import render_index, render_junit, render_text

INDEX_FILE, JUNIT_FILE, TEXT_FILE = SUITE_INDEX, "junit.xml", "summary.txt"
MIN_PARALLEL_REPORTS = 6  # fewer are drawn in this process: starting workers costs ~2 s


@dataclass(frozen=True)
class SuiteReport:
    cells: list[Cell]
    text: str
    index: Path
    junit: Path
    summary: Path

    @property
    def wrong(self) -> list[Cell]:
        return [cell for cell in self.cells if not cell.correct]

    @property
    def ok(self) -> bool:
        return bool(self.cells) and not self.wrong


def write_suite_report(
    rundirs: Sequence[Path],
    out: Path,
    expected: Mapping[str, str] | None = None,
    *,
    write_missing_reports: bool = True,
    not_applicable: Sequence[str] = (),
    upgrade: Upgrade | None = None,
    flagged: Sequence[str] = (),
) -> SuiteReport:
    """Write ``index.html``, ``junit.xml`` and ``summary.txt`` into ``out``; return them.

    ``write_missing_reports`` writes a run's ``report.html`` first when it has
    none, so every cell links somewhere. Raises ``ValueError`` for an
    ``expected`` value that is not pass, fail or a verdict. ``not_applicable``:
    ``"scenario[column]: why"`` sentences on cells that were not run (injections a
    user's cache cannot take, cells an interrupted check never started).
    ``upgrade``: how the face brings an older summary up to date for a missing
    run report (:func:`harness.analysis.upgrade.upgrade`). ``flagged``: the history's
    regression flags, shown first on the index.
    """
    cells = build_cells([Path(d) for d in rundirs], expected or {})
    if write_missing_reports:
        _write_missing_reports(cells, upgrade)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = render_text(cells)
    index, junit, summary = out / INDEX_FILE, out / JUNIT_FILE, out / TEXT_FILE
    index.write_text(render_index(cells, out, not_applicable, flagged), encoding="utf-8")
    junit.write_bytes(render_junit(cells, not_applicable))
    summary.write_text(text, encoding="utf-8")
    return SuiteReport(cells, text, index, junit, summary)


def build_cells(rundirs: Sequence[Path], expected: Mapping[str, str]) -> list[Cell]:
    """One cell per run folder, in matrix order; repeated cells are numbered."""
    for value in expected.values():
        if value not in ("pass", "fail", *VERDICTS):
            raise ValueError(f"expected outcome {value!r}: use pass, fail or one verdict.")
    seen: dict[tuple[str, str], int] = {}
    cells = []
    for rundir in rundirs:
        cell = _cell(rundir, expected)
        key = (cell.scenario, cell.column)
        seen[key] = seen.get(key, 0) + 1
        cells.append(cell if seen[key] == 1 else replace(cell, repeat=seen[key]))
    cells = _mark_same_as_fixed(cells)
    return sorted(cells, key=lambda c: (c.scenario, c.column != FIXED, c.column, c.repeat))


def _mark_same_as_fixed(cells: list[Cell]) -> list[Cell]:
    """Injected cells whose process ending (crashed, hung, ...) the fixed run shared."""
    fixed = {(c.scenario, c.verdict) for c in cells if c.column == FIXED}
    return [
        replace(c, same_as_fixed=True)
        if c.column != FIXED and c.verdict in PROCESS_VERDICTS and (c.scenario, c.verdict) in fixed
        else c
        for c in cells
    ]


def _cell(rundir: Path, expected: Mapping[str, str]) -> Cell:
    try:
        summary = load_summary(rundir)
    except UsageError as exc:
        return _unreadable(rundir, exc.message, expected)
    name, where = summary.scenario, column(summary)
    return Cell(
        scenario=name, column=where, verdict=summary.verdict,
        expected=expectation(name, where, expected), rundir=rundir,
        duration_s=summary.duration_s, detect_s=detect_s(summary), reasons=tuple(summary.reasons),
        signal=convicting_signal(summary), culprit=next(iter(summary.where_it_grows()), ""),
    )


def _unreadable(rundir: Path, why: str, expected: Mapping[str, str]) -> Cell:
    """A run folder without a readable summary: an error cell, named from its config."""
    try:
        config = json.loads((rundir / CONFIG_FILE).read_text(encoding="utf-8"))
        name, inject = str(config["scenario"]), [str(x) for x in config.get("inject", [])]
    except (OSError, ValueError, KeyError, TypeError):
        name, inject = rundir.name, []
    where = column_of(inject)
    return Cell(name, where, "error", expectation(name, where, expected), rundir, 0.0, None,
                (f"no usable summary: {why}",))


def expectation(scenario: str, where: str, expected: Mapping[str, str]) -> str:
    """What the cell should be: an override (see the module docstring) or the default."""
    for key in (f"{scenario}/{where}", where, scenario):
        if key in expected:
            return expected[key]
    return "pass" if where == FIXED else "fail"


def _write_missing_reports(cells: Sequence[Cell], upgrade: Upgrade | None) -> None:
    """Each missing run report, on every core: the cells are done, the machine is free
    (a suite of 30 cells spent 85 s drawing them one after another)."""
    missing = [cell.rundir for cell in cells if not (cell.rundir / REPORT_FILE).exists()
               and (cell.rundir / SUMMARY_FILE).exists()]
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
