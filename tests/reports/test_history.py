"""History: appends from concurrent writers, trends, and the noise-band flag."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.analysis.summary import budget_limits
from harness.config import read_budgets
from harness.errors import UsageError
from harness.history import append_suite, check_latest, flag_regressions, noise_band, trends
from harness.runfiles.summary import AnalysisDetails, load_summary, write_summary
from harness.runfiles.summary_records import Metric
from reports.history import flag_sentence, write_trend_plots
from tests.reports.synth import MB, write_summary_only

WRITERS, SUITES, RUNS = 4, 15, 3
START = datetime(2025, 1, 1, 2, 0, tzinfo=UTC)


def nightly(db: Path, base: Path, growths: list[float], scenario: str = "radix") -> None:
    """One fixed run per night with the given growth (bytes per hour), 2 MB/h intervals."""
    for night, growth in enumerate(growths):
        rundir = write_summary_only(base / f"{scenario}-{night}", scenario, (), "pass", growth)
        append_suite(db, [rundir], commit=f"c{night:06d}", when=START + timedelta(days=night))


def _writer(db: Path, base: Path, writer: int, start: Any) -> None:
    suites = [
        [write_summary_only(base / f"w{writer}-s{suite}-r{run}", f"scenario-{run}", (), "pass",
                            float(writer * 100 + suite * 10 + run) * MB) for run in range(RUNS)]
        for suite in range(SUITES)
    ]
    start.wait()  # all writers hit the not-yet-existing database at once
    for suite, rundirs in enumerate(suites):
        append_suite(db, rundirs, commit=f"w{writer}", when=START + timedelta(days=suite))


def test_concurrent_appends_from_four_processes_keep_every_row(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    context = multiprocessing.get_context("fork")
    start = context.Barrier(WRITERS)
    writers = [context.Process(target=_writer, args=(db, tmp_path, w, start))
               for w in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        count = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert count == WRITERS * SUITES * RUNS


def test_appending_the_same_suite_twice_adds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    runs = [write_summary_only(tmp_path / "a", "radix"), tmp_path / "missing"]
    first = append_suite(db, runs, commit="abc", when=START)
    again = append_suite(db, runs, commit="abc", when=START + timedelta(days=1))
    assert (first.added, again.added, again.already_present) == (1, 0, 1)
    assert [path for path, _ in first.skipped] == [tmp_path / "missing"]


def test_trends_keep_the_last_nights_per_series_oldest_first(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    nightly(db, tmp_path, [float(i) * MB for i in range(20)])
    injected = write_summary_only(tmp_path / "inj", "radix", ("lru-unlink",), "leak", 1e9)
    append_suite(db, [injected], when=START)
    found = trends(db, "radix", nights=14)
    assert [t.column for t in found] == ["fixed", "inject:lru-unlink"]
    points = found[0].points
    assert len(points) == 14 and points[0].growth_per_h == 6 * MB
    assert points[-1].recorded_at == START + timedelta(days=19) and points[-1].commit == "c000019"
    assert points[-1].growth_ci == (17 * MB, 21 * MB)


def test_a_jump_is_flagged_and_noise_is_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    noise = list(5 * MB + rng.normal(0, 2 * MB, 12))
    db = tmp_path / "h.sqlite"
    nightly(db, tmp_path, [*noise, 90 * MB])
    flags = flag_regressions(db)
    assert len(flags) == 1 and flags[0].direction == "up"
    assert "grows more than usual" in flag_sentence(flags[0])
    quiet = tmp_path / "quiet.sqlite"
    nightly(quiet, tmp_path / "q", [*noise, 9 * MB])
    assert flag_regressions(quiet) == []


def test_noise_never_flags_over_many_histories(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    rng = np.random.default_rng(11)
    for scenario in range(30):
        nightly(db, tmp_path, list(20 * MB + rng.normal(0, 3 * MB, 10)), f"s{scenario}")
    assert flag_regressions(db) == []


def test_too_short_a_history_never_flags(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    nightly(db, tmp_path, [1 * MB, 1 * MB, 500 * MB])
    assert check_latest(trends(db)[0]) is None


def test_band_floor_and_median() -> None:
    band = noise_band([0.0, 0.0, 0.0, 0.0, 0.0])
    assert band.centre == 0.0 and band.half == 10e6
    assert noise_band([1e6, 2e6, 3e6, 1e9]).centre == 2.5e6  # one wild night barely moves it


def test_trend_plots_one_per_scenario(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    nightly(db, tmp_path, [5 * MB] * 8)
    nightly(db, tmp_path, [1 * MB] * 3, scenario="mamba:lru")
    written = write_trend_plots(db, tmp_path / "trends")
    assert sorted(p.name for p in written) == ["trend-mamba-lru.png", "trend-radix.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in written)


def test_a_file_that_is_not_a_database_is_a_sentence(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    db.write_text("not sqlite" * 100)
    with pytest.raises(UsageError, match="not a history database"):
        trends(db)


def test_the_history_command_writes_plots_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from leak_harness.cli import main

    db = tmp_path / "h.sqlite"
    nightly(db, tmp_path / "runs", [5 * MB] * 4)
    monkeypatch.chdir(tmp_path)
    assert main(["history", "--db", str(db)]) == 0
    assert "radix[fixed]: 4 runs" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()  # reading the history wrote nothing
    assert main(["history", "--db", str(db), "--plots", "trends"]) == 0
    assert (tmp_path / "trends" / "trend-radix.png").exists()


def test_each_judged_budget_is_kept_and_a_garbage_leak_shows_on_its_own_signal(
    tmp_path: Path,
) -> None:
    db = tmp_path / "h.sqlite"
    run = write_summary_only(tmp_path / "lru", "mamba-lru", ("mamba-lru-unlink",), "leak", 0.0)
    summary = load_summary(run)
    texts = ("rss: 50 MB/h", "cyclic_garbage: 0.5 /kop", "idle_pool_mismatch: <= 0")
    metrics = {
        **summary.metrics,  # flat RSS: convicted on garbage alone
        "rss_growth": dataclasses.replace(summary.metrics["rss_growth"], status="pass"),
        "cyclic_garbage": Metric(21.0, "/kop", (19.0, 23.0), texts[1], "leak"),
        "idle_pool_mismatch_max": Metric(3.0, "", None, texts[2], "leak"),
    }
    limits = budget_limits(read_budgets(texts, "the test's budgets"))
    write_summary(run, dataclasses.replace(summary, metrics=metrics,
                                           analysis=AnalysisDetails(limits=limits)))
    append_suite(db, [run], when=START)
    (trend,) = trends(db)
    by_name = {b.series: b for b in trend.points[0].budgets}
    assert by_name["cyclic_garbage"].share == 42.0 and by_name["cyclic_garbage"].kind == "rate"
    assert by_name["cyclic_garbage"].ci == (19.0, 23.0)
    assert by_name["rss"].share == 0.0 and by_name["rss"].status == "pass"
    assert by_name["idle_pool_mismatch"].share is None  # a limit of 0 has no share
    from leak_harness.cli.history import trend_line
    assert trend_line(trend).endswith(
        "latest failed on cyclic_garbage 21 /kop against 'cyclic_garbage: 0.5 /kop', "
        "idle_pool_mismatch 3 against 'idle_pool_mismatch: <= 0'")
    (plot,) = write_trend_plots(db, tmp_path / "trends")
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_a_version_1_history_is_upgraded_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with sqlite3.connect(db) as conn:  # the schema version 1 wrote
        conn.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, run_key TEXT NOT NULL UNIQUE, "
            "recorded_at TEXT NOT NULL, commit_sha TEXT, scenario TEXT NOT NULL, injected TEXT "
            "NOT NULL, verdict TEXT NOT NULL, growth_per_h REAL, growth_lo REAL, growth_hi REAL,"
            " garbage_per_kop REAL, detect_s REAL, duration_s REAL NOT NULL, rundir TEXT NOT "
            "NULL); INSERT INTO runs VALUES (1, 'k', '2025-01-01T02:00:00+00:00', 'c1', 'radix',"
            " '', 'pass', 5e6, 3e6, 7e6, 0.0, NULL, 600.0, '/r'); PRAGMA user_version = 1;")
    nightly(db, tmp_path, [6 * MB])
    (trend,) = trends(db)
    assert [p.growth_per_h for p in trend.points] == [5 * MB, 6 * MB]
    assert trend.points[0].budgets == () and trend.points[1].budgets[0].budget == "rss: 50 MB/h"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert write_trend_plots(db, tmp_path / "trends")


def test_an_interrupted_run_is_kept_out_of_the_history(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    cut = write_summary_only(tmp_path / "cut", "radix", (), "interrupted", 80 * MB)
    done = write_summary_only(tmp_path / "done", "radix", (), "pass", 1 * MB)
    appended = append_suite(db, [cut, done], when=START)
    assert appended.added == 1 and appended.skipped == [(cut, "interrupted before it finished")]


def test_a_flagged_night_says_so_at_the_top_of_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from leak_harness.cli.suite_out import finish_suite

    rng = np.random.default_rng(7)
    db = tmp_path / "h.sqlite"
    nightly(db, tmp_path, list(5 * MB + rng.normal(0, 2 * MB, 12)))
    tonight = write_summary_only(tmp_path / "tonight", "radix", (), "pass", 45 * MB)
    assert finish_suite([tonight], tmp_path / "suite", db) == 1  # the flag fails the night
    index = (tmp_path / "suite" / "index.html").read_text(encoding="utf-8")
    assert "Flagged by the history" in index and "grows more than usual" in index
    assert index.index("Flagged by the history") < index.index("<h2>Runs</h2>")
