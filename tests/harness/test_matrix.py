"""The detection matrix: planning, sharding, early stop and the suite it writes."""

from __future__ import annotations

import fcntl
import os
from dataclasses import replace
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.parent import folder_lock
from harness.parent.matrix import (
    CheckOptions,
    clear_previous_run,
    parse_shard,
    plan,
    run_matrix,
)
from harness.parent.shards import deal, expected_seconds, pick_shard, shard_from_environment
from harness.runfiles.names import LOCK_FILE, SAMPLES_FILE
from tests.harness.fixtures.scenarios import TOGGLE

OTHER = replace(TOGGLE, name="other", regressions=("a", "b"))


def test_plan_has_a_fixed_cell_and_one_per_regression() -> None:
    labels = [c.label for c in plan([TOGGLE, OTHER])]
    assert labels == [
        "toggle[fixed]", "toggle[inject:keep-chunks]",
        "other[fixed]", "other[inject:a]", "other[inject:b]",
    ]


def test_select_is_a_substring_or_a_glob() -> None:
    assert [c.label for c in plan([TOGGLE, OTHER], "inject:a")] == ["other[inject:a]"]
    assert len(plan([TOGGLE, OTHER], "other*")) == 3


def test_a_label_copied_from_the_output_selects_its_cell() -> None:
    fixed, injected = plan([TOGGLE])
    assert plan([TOGGLE], fixed.label) == [fixed]
    assert plan([TOGGLE], injected.label) == [injected]


def test_shards_cover_every_cell_once_and_the_same_inputs_give_the_same_shards() -> None:
    cells = plan([TOGGLE, OTHER])
    options = CheckOptions(out=Path("out"))
    shards = [pick_shard(cells, f"{i}/3", options, {}) for i in (1, 2, 3)]
    assert sorted(c.label for s in shards for c in s) == sorted(c.label for c in cells)
    again = [pick_shard(list(reversed(cells)), f"{i}/3", options, {}) for i in (1, 2, 3)]
    assert [{c.label for c in s} for s in again] == [{c.label for c in s} for s in shards]


def test_cells_are_dealt_by_length_so_the_shards_end_together() -> None:
    # Twelve fixed runs of 60 s and twelve injected cells that stop within 5 s: by
    # position, shard 1 of 2 took every fixed run (720 s against 60 s).
    many = [replace(TOGGLE, name=f"s{i:02d}", regressions=("r",)) for i in range(12)]
    cells = plan(many)
    seconds = {c.label: 60.0 if c.inject is None else 5.0 for c in cells}
    first, second = deal(cells, 2, lambda c: seconds[c.label])
    loads = [sum(seconds[c.label] for c in shard) for shard in (first, second)]
    assert loads == [390.0, 390.0]
    assert [c.label for c in first] == sorted((c.label for c in first),
                                              key=[c.label for c in cells].index)  # plan order


def test_the_history_knows_a_cells_length_better_than_the_plan() -> None:
    fixed, injected = plan([TOGGLE])
    assert expected_seconds(injected, 20.0, {}) == 5.0 + 0.25 * 20.0
    assert expected_seconds(injected, 20.0, {("toggle", "inject:keep-chunks"): 2.5}) == 2.5
    assert expected_seconds(fixed, 20.0, {}) == 25.0


@pytest.mark.parametrize(("env", "shard"), [
    ({"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "4"}, (2, 4)),  # GitLab: from 1
    ({"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}, (1, 3)),  # from 0
    ({"JOB_COMPLETION_INDEX": "3", "LEAK_HARNESS_SHARD_COUNT": "4"}, (4, 4)),  # Kubernetes
    ({"LEAK_HARNESS_SHARD_INDEX": "1", "LEAK_HARNESS_SHARD_COUNT": "2"}, (1, 2)),
])
def test_shard_auto_reads_the_ci_variables(env: dict[str, str], shard: tuple[int, int]) -> None:
    assert shard_from_environment(env) == shard


def test_shard_auto_without_ci_variables_is_one_sentence() -> None:
    with pytest.raises(UsageError, match="none of these variable pairs is set: "
                                         "LEAK_HARNESS_SHARD_INDEX and LEAK_HARNESS_SHARD_COUNT"):
        shard_from_environment({})
    with pytest.raises(UsageError, match="not two whole numbers"):
        shard_from_environment({"CI_NODE_INDEX": "x", "CI_NODE_TOTAL": "4"})


@pytest.mark.parametrize("text", ["0/2", "3/2", "x", "1-2"])
def test_bad_shards_are_one_sentence(text: str) -> None:
    with pytest.raises(UsageError, match="shard"):
        parse_shard(text)


def finished_run(rundir: Path) -> Path:
    (rundir / "plots").mkdir(parents=True)
    for name in (SAMPLES_FILE, "summary.json", "report.html", "plots/rss.png"):
        (rundir / name).write_text("{}\n")
    return rundir


def test_a_second_check_replaces_the_cells_last_run(tmp_path: Path) -> None:
    """`make leak-check` twice: the cell's folder is emptied, not refused (exit 2)."""
    rundir = finished_run(tmp_path / "toggle" / "fixed")
    try:
        clear_previous_run(rundir)
        assert [p.name for p in rundir.iterdir()] == [LOCK_FILE]  # held for the cell's run
    finally:
        folder_lock.release(rundir)
    assert list(rundir.iterdir()) == []


def test_a_cell_folder_another_run_is_writing_is_refused_and_kept(tmp_path: Path) -> None:
    rundir = finished_run(tmp_path / "toggle" / "fixed")
    fd = os.open(rundir / LOCK_FILE, os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live check's cell
        with pytest.raises(UsageError, match="another run is writing"):
            clear_previous_run(rundir)
        assert (rundir / SAMPLES_FILE).exists()
    finally:
        os.close(fd)


@pytest.mark.integration
def test_matrix_passes_fixed_catches_injected_and_stops_early(tmp_path: Path) -> None:
    scenario = replace(TOGGLE, name=f"{ROOT_SPEC}:TOGGLE")
    options = CheckOptions(out=tmp_path, jobs=2)
    results = run_matrix(plan([scenario]), options)
    verdicts = {r.cell.name: r.outcome.verdict for r in results}
    assert verdicts == {"fixed": "pass", "inject:keep-chunks": "leak"}
    assert all(r.correct for r in results)
    injected = results[1].outcome.summary
    assert injected.duration_s < 6.0  # stopped once certain, not at the full duration
    assert injected.time_to_detect_s is not None

    from reports.suite import write_suite_report

    report = write_suite_report([r.outcome.rundir for r in results], tmp_path / "suite")
    assert report.ok and report.index.exists() and report.junit.exists()

    from leak_harness.cli.check import suite_json

    data = suite_json([r.outcome.rundir for r in results], 0)
    assert data["ok"] is True and data["exit_code"] == 0
    assert [(c["column"], c["verdict"], c["correct"]) for c in data["cells"]] == [  # type: ignore[index, union-attr]
        ("fixed", "pass", True), ("inject:keep-chunks", "leak", True)]


def test_cell_correctness_rules() -> None:
    fixed, injected = plan([TOGGLE])
    assert fixed.correct("pass") and fixed.correct("suspicious")  # as run's exit code says
    assert not any(fixed.correct(v) for v in ("leak", "crashed", "hung", "error", "interrupted"))
    assert all(injected.correct(v) for v in ("leak", "crashed", "hung", "ceiling"))
    assert not any(injected.correct(v) for v in ("pass", "suspicious", "error", "interrupted"))


ROOT_SPEC = "tests.harness.fixtures.scenarios"


def test_the_live_check_table_fits_80_columns_and_tells_the_cells_apart(
    tmp_path: Path,
) -> None:
    import io

    from rich.console import Console

    from harness.parent.matrix import CellResult
    from harness.parent.runner import RunOutcome
    from harness.parent.supervisor import Snapshot
    from harness.runfiles.summary import load_summary
    from leak_harness.cli.check_view import LiveView
    from tests.reports.synth import write_summary_only

    fixed, injected = plan([TOGGLE])
    view = LiveView([fixed, injected])
    view._live = type("Quiet", (), {"update": lambda self, table: None})()
    view.progress(fixed, Snapshot(23.0, 20.0, 900, 40.0, "measuring", 300_000_000))
    rundir = write_summary_only(tmp_path / "i", "toggle", ("keep-chunks",), "leak", 1e9)
    view.landed(CellResult(injected, RunOutcome("leak", rundir, None, load_summary(rundir))))
    buffer = io.StringIO()
    Console(file=buffer, width=80, color_system=None).print(view._table())
    text = buffer.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = [line for line in text.splitlines() if "fixed" in line or "+keep-chunks" in line]
    assert len(rows) == 2 and "toggle" in rows[0] and "toggle" not in rows[1]  # once per group
    assert "finishing" in rows[0] and "20/20 s" in rows[0] and "23" not in rows[0]
    assert "leak (ok" in text  # the verdict, not the label again


def takes_keep_chunks(**options: object) -> None:
    """A target factory that implements one of the reference regressions."""


takes_keep_chunks.regressions = ("keep-chunks",)  # type: ignore[attr-defined]


def test_on_a_users_target_injected_cells_are_na_unless_the_factory_declares_them() -> None:
    from leak_harness.cli.check import applicable_cells

    cells = plan([TOGGLE])
    runnable, na = applicable_cells(cells, "tests.harness.fixtures.scenarios:wait_forever")
    assert [c.name for c in runnable] == ["fixed"]
    assert na == ["toggle[inject:keep-chunks]: n/a (the target declares no regression "
                  "'keep-chunks'; a factory lists those it implements in a 'regressions' "
                  "attribute)"]
    declared, none = applicable_cells(cells, "tests.harness.test_matrix:takes_keep_chunks")
    assert declared == cells and none == []
    assert applicable_cells(cells, None) == (cells, [])
