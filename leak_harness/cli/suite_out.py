"""What ``check`` and ``report`` do once run folders exist: judge the suite once
(:func:`harness.suite.judge_suite`), append it to the history, take the
regression flags, write the suite report (index.html, junit.xml, summary.txt)
and return the exit code.

The exit code is the suite's and the history's rule (:meth:`harness.suite.Suite.exit_code`,
:mod:`harness.history`); the reports only draw and word the judged suite."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from harness.errors import UsageError
from harness.history import append_runs, regressions
from harness.provenance import short_commit
from harness.runfiles.shard_plan import Night
from harness.suite import CellOutcome, Suite, judge_suite, with_absent
from harness.verdicts import EXIT_HARNESS, EXIT_PASS


def finish_suite(
    rundirs: Sequence[Path], out: Path, history: Path | None, target: str | None = None,
    not_applicable: Sequence[str] = (), *, night: Night | None = None,
    history_required: bool = False,
) -> int:
    """Judge the run folders (each summary read once), with an ``error`` cell for each
    cell the ``night``'s shard plans name and no folder holds, and :func:`publish_suite`
    them."""
    suite, incomplete = with_absent(judge_suite(rundirs), night)
    return publish_suite(suite, out, history, target, [*incomplete, *not_applicable],
                         history_required=history_required, incomplete=incomplete)


def publish_suite(
    suite: Suite, out: Path, history: Path | None, target: str | None = None,
    not_applicable: Sequence[str] = (), *, history_required: bool = False,
    incomplete: Sequence[str] = (),
) -> int:
    """Append the judged suite to the history (rows under the commit of the code under
    test: ``target``'s repository, else the harness's), write its report, print it and
    return its exit code: 0 when every cell is right and nothing is flagged, 3 when only
    cells the harness could not judge are wrong, else 1. With ``history_required`` (a
    nightly merge: its rows are the night's record) a history that could not be written
    turns a 0 into 3; a local ``check`` keeps 0 with its line. ``incomplete``: what a
    merge found missing of the night, printed as its last lines."""
    from leak_harness.cli.report_drawer import draw_missing_reports
    from reports.history import flag_sentence, write_trend_plots
    from reports.suite import write_suite_report
    from reports.suite.outputs import TRENDS_DIR

    flagged, notes, history_lost = [], [], False
    if history is not None:  # first, so the index links the trend plots
        try:
            added = append_runs(history, suite.runs, commit=short_commit(target))
            flagged = regressions(history)
            plots = write_trend_plots(history, out / TRENDS_DIR)
        except (sqlite3.Error, OSError, UsageError) as exc:
            # The cells ran and were judged: their report must not be lost with the history.
            history_lost = True
            notes.append(f"HISTORY NOT UPDATED: {history}: {str(exc).rstrip('.')}; the suite "
                         "report below is complete" + (
                             ", but the night's rows are not recorded: this exits 3"
                             if history_required else ""))
        else:
            notes.append(f"history: {added.added} rows added to {history}; {len(plots)} "
                         f"trend plots in {out / TRENDS_DIR}")
            notes += [f"REGRESSION: {flag_sentence(flag)}" for flag in flagged]
    draw_missing_reports(suite)
    written = write_suite_report(suite, out, not_applicable=not_applicable,
                                 flagged=[flag_sentence(flag) for flag in flagged])
    step_summary = os.environ.get(STEP_SUMMARY_ENV)
    if step_summary:
        append_step_summary(Path(step_summary), suite.cells, flagged_sentences(notes))
    print(written.summary.read_text(encoding="utf-8"))
    print(f"suite report: {written.index}")
    for note in notes:
        print(note)
    for sentence in incomplete:
        print(f"INCOMPLETE NIGHT: {sentence}")
    code = suite.exit_code(bool(flagged))
    return EXIT_HARNESS if history_lost and history_required and code == EXIT_PASS else code


STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # GitHub Actions renders this file on the run's page


def flagged_sentences(notes: Sequence[str]) -> list[str]:
    return [n for n in notes if n.startswith("REGRESSION: ")]


def append_step_summary(path: Path, cells: Sequence[CellOutcome],
                        flagged: Sequence[str]) -> None:
    """The matrix as a Markdown table on the CI run's page (GitHub's job summary); a
    file that cannot be written is said in one sentence and the suite goes on."""
    wrong = sum(not c.correct for c in cells)
    lines = [f"### leak-harness: {len(cells) - wrong} of {len(cells)} cells right", "",
             "| scenario | cell | verdict | right | detected at |", "|---|---|---|---|---|"]
    for c in cells:
        detect = f"{c.detect_s:.1f} s" if c.detect_s is not None else "-"
        lines.append(f"| {c.scenario} | {c.name} | {c.verdict} | "
                     f"{'yes' if c.correct else '**no**'} | {detect} |")
    lines += ["", *(f"- {sentence}" for sentence in flagged), ""]
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    except OSError as exc:
        print(f"leak-harness: could not append the job summary to {path}: {exc.strerror}.")
