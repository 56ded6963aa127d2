"""What ``check`` and ``report`` do once run folders exist: the suite report
(index.html, junit.xml, summary.txt), the history rows and the regression flags.

The exit code is the matrix's and the history's rule (:mod:`harness.history`);
the reports only draw and word them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.history import append_suite, regressions
from harness.runfiles.samples import short_commit
from harness.verdicts import ERROR, EXIT_HARNESS, EXIT_PASS, EXIT_REGRESSION


def finish_suite(
    rundirs: Sequence[Path], out: Path, history: Path | None, target: str | None = None,
    not_applicable: Sequence[str] = (),
) -> int:
    """Write the suite report and history (rows under the commit of the code under
    test: ``target``'s repository, else the harness's); 0 when every cell is right
    and nothing is flagged, 3 when only cells the harness could not judge are wrong, else 1."""
    from harness.analysis.upgrade import upgrade
    from reports.history import flag_sentence, write_trend_plots
    from reports.suite import write_suite_report
    from reports.suite.outputs import TRENDS_DIR

    flagged, notes = [], []
    if history is not None:  # first, so the index links the trend plots
        added = append_suite(history, rundirs, commit=short_commit(target))
        flagged = regressions(history)
        plots = write_trend_plots(history, out / TRENDS_DIR)
        notes.append(f"history: {added.added} rows added to {history}; {len(plots)} trend plots "
                     f"in {out / TRENDS_DIR}")
        notes += [f"REGRESSION: {flag_sentence(flag)}" for flag in flagged]
    report = write_suite_report(rundirs, out, not_applicable=not_applicable, upgrade=upgrade)
    print(report.text)
    print(f"suite report: {report.index}")
    for note in notes:
        print(note)
    return suite_exit_code(report.ok, [c.verdict for c in report.wrong], bool(flagged))


def suite_exit_code(ok: bool, wrong_verdicts: Sequence[str], flagged: bool) -> int:
    """0 every cell right; 3 when the only wrong cells are ``error`` (the harness could
    not judge them: a broken tool, not a regression); else 1."""
    if ok and not flagged:
        return EXIT_PASS
    if wrong_verdicts and not flagged and all(v == ERROR for v in wrong_verdicts):
        return EXIT_HARNESS
    return EXIT_REGRESSION
