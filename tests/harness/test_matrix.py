"""The detection matrix: planning, sharding, early stop and the suite it writes."""

from __future__ import annotations

import fcntl
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.config import RunConfig
from harness.errors import UsageError
from harness.parent import folder_lock
from harness.parent.matrix import (
    Cell,
    CellResult,
    CheckOptions,
    clear_previous_run,
    judge_results,
    plan,
    run_matrix,
    stop_when_certain,
)
from harness.parent.runner import RunOutcome
from harness.parent.shards import (
    deal,
    expected_seconds,
    parse_shard,
    pick_shard,
    shard_from_environment,
)
from harness.runfiles.names import LOCK_FILE, SAMPLES_FILE
from leak_harness.cli.check_view import LiveView, PlainView
from tests.analysis.synth import budgets, run_data
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


def test_several_comma_separated_selections_take_any_cell_one_of_them_takes() -> None:
    labels = [c.label for c in plan([TOGGLE, OTHER], "inject:a,toggle*")]
    assert labels == [c.label for c in plan([TOGGLE])] + ["other[inject:a]"]


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
    assert judge_results(results).ok
    injected = results[1].outcome.summary
    assert injected.duration_s < 6.0  # stopped once certain, not at the full duration
    assert injected.time_to_detect_s is not None

    from harness.suite import judge_suite
    from reports.suite import write_suite_report

    suite = judge_suite([r.outcome.rundir for r in results])
    report = write_suite_report(suite, tmp_path / "suite")
    assert suite.ok and report.index.exists() and report.junit.exists()

    from leak_harness.cli.check import suite_json

    data = suite_json(suite, 0)
    assert data["ok"] is True and data["exit_code"] == 0
    assert [(c["column"], c["verdict"], c["correct"]) for c in data["cells"]] == [  # type: ignore[index, union-attr]
        ("fixed", "pass", True), ("inject:keep-chunks", "leak", True)]


def test_cell_correctness_rules() -> None:
    from harness.suite import CellOutcome, expectation

    def right(column: str, verdict: str) -> bool:
        return CellOutcome("toggle", column, verdict, expectation("toggle", column, {}),
                           Path("r"), 1.0, None, ()).correct

    fixed, injected = "fixed", "inject:keep-chunks"
    assert right(fixed, "pass") and right(fixed, "suspicious")  # as run's exit code says
    assert not any(right(fixed, v) for v in ("leak", "crashed", "hung", "error", "interrupted"))
    assert all(right(injected, v) for v in ("leak", "crashed", "hung", "ceiling"))
    assert not any(right(injected, v) for v in ("pass", "suspicious", "error", "interrupted"))


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


def quiet(view: LiveView) -> LiveView:
    """A live table that draws nothing: the test reads ``view._table()`` itself."""
    view._live = type("Quiet", (), {"update": lambda self, table: None})()
    return view


def table_text(view: LiveView) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=80, color_system=None).print(view._table())
    return buffer.getvalue()


def landed(cell: Cell, rundir: Path) -> CellResult:
    """A cell landed with the run in ``rundir``, as the matrix hands it to the view."""
    from harness.runfiles.summary import load_summary

    summary = load_summary(rundir)
    return CellResult(cell, RunOutcome(summary.verdict, rundir, None, summary))


def crashed_alike(tmp_path: Path) -> tuple[Path, Path]:
    """The fixed and the injected run of toggle, both crashed the same way."""
    from tests.reports.synth import write_summary_only

    return (write_summary_only(tmp_path / "f", "toggle", (), "crashed"),
            write_summary_only(tmp_path / "i", "toggle", ("keep-chunks",), "crashed"))


@pytest.mark.parametrize("injected_first", [True, False])
def test_an_injected_crash_the_fixed_run_shared_ends_wrong_live_and_in_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], injected_first: bool,
) -> None:
    """Whichever lands first (``-j 2``), the last live table says what the exit code says."""
    from harness.suite import judge_suite

    fixed, injected = plan([TOGGLE])
    fixed_run, injected_run = crashed_alike(tmp_path)
    view, plain = quiet(LiveView([fixed, injected])), PlainView([fixed, injected])
    order = [(injected, injected_run), (fixed, fixed_run)]
    for cell, rundir in order if injected_first else order[::-1]:
        view.landed(landed(cell, rundir))
        plain.landed(landed(cell, rundir))
        if injected_first and cell is injected:  # right so far: its fixed run is to come
            assert view.marks[injected.label] == "ok?"
            assert "+keep-chunks" in table_text(view) and "crashed (ok?" in table_text(view)
    assert view.marks == {fixed.label: "WRONG", injected.label: "WRONG: as fixed"}
    assert "crashed (WRONG: as fixed" in table_text(view)
    lines = capsys.readouterr().out.splitlines()  # the plain view's, for CI logs
    assert lines[-1].endswith(
        f"{injected.label}: {'now ' if injected_first else ''}crashed (WRONG: as fixed)")
    assert (lines[0] == f"[1/2] {injected.label}: crashed (ok?)") is injected_first
    # The exit code's suite, judged from the same summaries on disk, agrees.
    suite = judge_suite([fixed_run, injected_run])
    assert [c.correct for c in suite.cells] == [False, False] and suite.exit_code() == 1
    assert suite.cells[1].same_as_fixed and "not a detection" in suite.cells[1].why_wrong


def test_a_crash_the_fixed_run_did_not_share_is_a_detection_live_too(tmp_path: Path) -> None:
    from tests.reports.synth import write_summary_only

    fixed, injected = plan([TOGGLE])
    view = quiet(LiveView([fixed, injected]))
    view.landed(landed(injected, write_summary_only(tmp_path / "i", "toggle", ("keep-chunks",),
                                                    "crashed")))
    view.landed(landed(fixed, write_summary_only(tmp_path / "f", "toggle", (), "pass")))
    assert view.marks == {injected.label: "ok", fixed.label: "ok"}
    only = quiet(LiveView([injected]))  # -k picked the injected cell alone: nothing to wait for
    only.landed(landed(injected, tmp_path / "i"))
    assert only.marks == {injected.label: "ok"}


@pytest.mark.integration
def test_check_of_a_scenario_that_crashes_fixed_and_injected_alike_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A whole ``check -j 2`` of a scenario that crashes whatever is injected: the live
    lines, ``--json`` and the exit code all call the injected cell wrong."""
    import json

    from harness import registry
    from leak_harness.cli import main

    monkeypatch.setattr(registry, "PACKAGE", "tests.harness.fixtures.broken_catalog")
    code = main(["check", "-j", "2", "--out", str(tmp_path / "check"), "--no-history",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 1, err
    data = json.loads(out)
    assert data["exit_code"] == 1 and data["ok"] is False
    assert [(c["column"], c["verdict"], c["correct"]) for c in data["cells"]] == [
        ("fixed", "crashed", False), ("inject:keep-chunks", "crashed", False)]
    # The live lines went to stderr (stdout carries the JSON): the injected cell's last
    # line is WRONG, whether it landed before its fixed cell (ok?, then "now") or after.
    label = f"{ROOT_SPEC}:CRASHING_EITHER_WAY[inject:keep-chunks]"
    said = [line for line in err.splitlines() if f"{label}: " in line and "(" in line]
    assert said and "crashed (WRONG: as fixed" in said[-1], err
    assert "not a detection" in (tmp_path / "check" / "summary.txt").read_text()


def takes_keep_chunks(**options: object) -> None:
    """A target factory that implements one of the reference regressions."""


takes_keep_chunks.regressions = ("keep-chunks",)  # type: ignore[attr-defined]


def runs_as_released(**options: object) -> None:
    """A target factory that says in its own words why it takes no regression."""


runs_as_released.no_regressions = "it runs its code as released"  # type: ignore[attr-defined]


def test_on_a_users_target_injected_cells_are_na_unless_the_factory_declares_them() -> None:
    from leak_harness.cli.check import applicable_cells

    cells = plan([TOGGLE])
    runnable, na = applicable_cells(cells, "tests.harness.fixtures.scenarios:wait_forever")
    assert [c.name for c in runnable] == ["fixed"]
    assert na == ["toggle[inject:keep-chunks]: n/a (the target declares no regression "
                  "'keep-chunks'; a factory lists those it implements in a 'regressions' "
                  "attribute)"]
    declared, none = applicable_cells(cells, "tests.harness.test_matrix:takes_keep_chunks")
    _, own = applicable_cells(cells, "tests.harness.test_matrix:runs_as_released")
    assert own == ["toggle[inject:keep-chunks]: n/a (it runs its code as released)"]
    assert declared == cells and none == []
    assert applicable_cells(cells, None) == (cells, [])


def test_the_early_stop_skips_a_budget_the_run_never_published() -> None:
    """A gauge published only with an optional call (``stale_request_entries`` needs
    ``request_tables()``) is skipped by the verdict; the early stop must skip it too, or
    it raises and is switched off (an injected cell then runs to its crash)."""
    t = np.arange(0.0, 12.0, 0.25)
    data = run_data(rss=(t, np.full_like(t, 1e9)),
                    gauges={"idle_pool_mismatch": (t, (t > 4).astype(float) * 7)})
    stale, mismatch = budgets("stale_request_entries: <= 0", "idle_pool_mismatch: <= 0")
    config = RunConfig(scenario="x", rundir="/tmp/x", budgets=(mismatch, stale),
                       skippable_budgets=(stale,))
    assert stop_when_certain(config)(data)
