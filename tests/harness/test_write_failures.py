"""Write failures after the work is done: a sentence, the verdict kept, nothing else lost."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from harness.runfiles.reader import open_run
from leak_harness.cli import main
from leak_harness.cli.base import report_line
from leak_harness.cli.suite_out import finish_suite
from tests.reports.synth import MB, write_summary_only


def test_a_history_that_cannot_be_written_loses_neither_the_suite_report_nor_the_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    runs = [write_summary_only(tmp_path / "f", "radix", (), "pass", 1 * MB),
            write_summary_only(tmp_path / "i", "radix", ("unlink",), "leak", 900 * MB)]
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")  # the history's folder cannot be made
    code = finish_suite(runs, tmp_path / "suite", blocked / "history.sqlite")
    out = capsys.readouterr().out
    assert code == 0  # both cells right: the gate says what the cells say
    assert "HISTORY NOT UPDATED:" in out and "the suite report below is complete" in out
    for name in ("index.html", "junit.xml", "summary.txt"):
        assert (tmp_path / "suite" / name).exists()


def test_a_history_locked_by_another_writer_past_the_busy_timeout_is_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from harness.history import db

    runs = [write_summary_only(tmp_path / "f", "radix", (), "pass", 1 * MB)]
    history = tmp_path / "history.sqlite"
    with db.connect(history):
        pass  # the schema in place, as a night before this one left it
    monkeypatch.setattr(db, "BUSY_TIMEOUT_S", 0.5)  # the real 60 s, shortened
    holder = sqlite3.connect(history, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer that does not let go
    try:
        code = finish_suite(runs, tmp_path / "suite", history)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out = capsys.readouterr().out
    assert code == 0
    assert "HISTORY NOT UPDATED:" in out and "locked" in out, out
    for name in ("index.html", "junit.xml", "summary.txt"):
        assert (tmp_path / "suite" / name).exists()
    with db.connect(history) as conn:  # nothing half-written: the lock's holder left it whole
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_a_report_the_disk_cannot_take_is_a_sentence_beside_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import reports.run

    def full(*_: object, **__: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "rss.png"))

    monkeypatch.setattr(reports.run, "write_run_report", full)
    line = report_line(open_run(write_summary_only(tmp_path / "run", "radix")))
    assert line == (f"report: not written (No space left on device); the verdict above stands, "
                    f"its samples and summary are in {tmp_path / 'run'}")


def test_an_os_error_in_any_command_is_a_sentence_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import leak_harness.cli.report as report_command

    def full(_: Path) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "report.html"))

    run = write_summary_only(tmp_path / "run", "radix", (), "pass")
    monkeypatch.setattr(report_command, "write_report", full)
    assert main(["report", str(run)]) == 3
    err = capsys.readouterr().err
    assert err == (f"leak-harness: could not write or read {tmp_path / 'report.html'}: "
                   "No space left on device.\n")


@pytest.mark.parametrize("kind", ["text file", "folder is a file"])
def test_check_refuses_a_history_it_could_not_write_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    """RELIABILITY-3 cases 77 and 103: the cells ran, then the rows were dropped, exit 0."""
    from leak_harness.cli import check

    ran: list[object] = []
    monkeypatch.setattr(check.CheckCommand, "_run_cells",
                        lambda self, *args: ran.append(args) or (0, None))
    text = tmp_path / "text.db"
    text.write_text("not a database\n")
    history = text if kind == "text file" else text / "sub" / "history.sqlite"
    argv = ["check", "-k", "radix-steady", "--out", str(tmp_path / "out")]
    assert main([*argv, "--history", str(history)]) == 2
    said = capsys.readouterr().err
    assert said.rstrip().endswith("; choose another --history or --no-history."), said
    assert ran == []
    assert main([*argv, "--history", str(history), "--no-history"]) == 0 and len(ran) == 1
