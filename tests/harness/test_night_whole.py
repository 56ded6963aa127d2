"""The night is whole or says what is missing: shards record their plan, the merge
names a lost shard and its cells and fails; a history the merge could not write fails
it; a cell folder that disappeared is named under its own scenario and cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.runfiles.shard_plan import PLAN_FILE, PlannedCell, ShardPlan, read_plan, write_plan
from harness.suite import judge_suite, read_cell
from leak_harness.cli import check, main
from tests.reports.synth import write_summary_only

NIGHT = (PlannedCell("hiradix-multiturn", "fixed", 1),
         PlannedCell("hiradix-multiturn", "inject:hiradix-host-indices-view", 2))


def shard_folder(night: Path, index: int, count: int = 2) -> Path:
    """A shard's output folder, laid out as the nightly workflow downloads it."""
    return night / f"nightly-shard-{index - 1}" / f"shard-{index}-of-{count}"


def ran_shard_1(night: Path) -> None:
    out = shard_folder(night, 1)
    write_plan(out, ShardPlan(1, 2, NIGHT))
    write_summary_only(out / "hiradix-multiturn" / "fixed", "hiradix-multiturn")


def test_a_merge_that_lost_a_shard_names_it_and_its_cells_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """RELIABILITY-3 case 102: shard 2's artifact empty, '1 runs, all as expected', exit 0."""
    night = tmp_path / "nightly"
    ran_shard_1(night)
    (night / "nightly-shard-1").mkdir()  # the lost shard's download: empty
    code = main(["report", str(night), "--out", str(night)])
    out = capsys.readouterr().out
    assert code == 3, out  # the harness could not judge what never ran
    assert "INCOMPLETE NIGHT: shard 2 of 2 is missing: no plan and no run folder of it " \
           "(1 cells)" in out
    assert "INCOMPLETE NIGHT: 1 of 2 planned cells have no run: " \
           "hiradix-multiturn[inject:hiradix-host-indices-view]" in out
    assert "all as expected" not in out
    junit = (night / "junit.xml").read_text(encoding="utf-8")
    assert 'name="inject:hiradix-host-indices-view"' in junit and "shard 2 of 2 left no " \
           "plan and no run" in junit


def whole_night(tmp_path: Path) -> Path:
    """Both shards ran every cell the night planned."""
    night = tmp_path / "nightly"
    ran_shard_1(night)
    out = shard_folder(night, 2)
    write_plan(out, ShardPlan(2, 2, NIGHT))
    write_summary_only(out / "hiradix-multiturn" / "inject-hiradix-host-indices-view",
                       "hiradix-multiturn", ("hiradix-host-indices-view",), "leak", 1e9)
    return night


def test_a_whole_night_merges_as_before(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    night = whole_night(tmp_path)
    assert main(["report", str(night), "--out", str(night)]) == 0
    assert "INCOMPLETE" not in capsys.readouterr().out


def test_a_shard_cut_short_names_the_cells_it_planned_and_left_no_run_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    night = tmp_path / "nightly"
    ran_shard_1(night)
    write_plan(shard_folder(night, 2), ShardPlan(2, 2, NIGHT))  # it started, then died
    assert main(["report", str(night), "--out", str(night)]) == 3
    out = capsys.readouterr().out
    assert "shard 2 of 2 is missing" not in out
    cell = read_plan(shard_folder(night, 2) / PLAN_FILE)
    assert cell.count == 2 and cell.where == shard_folder(night, 2)
    assert "hiradix-multiturn[inject:hiradix-host-indices-view]" in out


def test_check_with_a_shard_records_the_whole_nights_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run_cells(self: Any, cells: list[Any], *args: Any) -> tuple[int, None]:
        return 0, None

    monkeypatch.setattr(check.CheckCommand, "_run_cells", run_cells)
    out = tmp_path / "shard-2-of-2"
    assert main(["check", "-k", "mamba-lru", "--shard", "2/2", "--no-history",
                 "--out", str(out)]) == 0
    plan = json.loads((out / PLAN_FILE).read_text(encoding="utf-8"))
    assert (plan["shard"], plan["count"]) == (2, 2)
    assert sorted((c["column"], c["shard"]) for c in plan["cells"]) == [
        ("fixed", 1), ("inject:mamba-lru-unlink", 2)]  # the longer cell first, to shard 1
    assert main(["check", "-k", "mamba-lru", "--out", str(tmp_path / "plain"),
                 "--no-history"]) == 0
    # An unsharded check is its own one shard: a merge of a copy of its folder names the
    # cells an interrupt never started (RELIABILITY-3 case 73: the list was lost).
    plain = json.loads((tmp_path / "plain" / PLAN_FILE).read_text(encoding="utf-8"))
    assert (plain["shard"], plain["count"]) == (1, 1)
    assert sorted((c["column"], c["shard"]) for c in plain["cells"]) == [
        ("fixed", 1), ("inject:mamba-lru-unlink", 1)]


def test_a_history_the_merge_could_not_write_fails_it_and_a_local_check_keeps_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Case 103: 'HISTORY NOT UPDATED ...', exit 0, the night's rows gone."""
    night = whole_night(tmp_path)
    text_db = tmp_path / "text.db"
    text_db.write_text("not a database\n", encoding="utf-8")
    assert main(["report", str(night), "--out", str(night), "--history", str(text_db)]) == 3
    printed = capsys.readouterr().out
    assert "HISTORY NOT UPDATED" in printed and "this exits 3" in printed

    from harness.suite import judge_suite as judge
    from leak_harness.cli.suite_out import publish_suite

    suite = judge([shard_folder(night, 1) / "hiradix-multiturn" / "fixed"])
    assert publish_suite(suite, tmp_path / "local", text_db) == 0  # check's default
    assert "this exits 3" not in capsys.readouterr().out


def test_a_cell_folder_removed_after_its_run_is_named_under_its_scenario_and_cell(
    tmp_path: Path,
) -> None:
    """Case 111: shown as the fixed cell of a scenario named after the folder."""
    gone = tmp_path / "hiradix-multiturn" / "inject-hiradix-host-indices-view"
    cell = read_cell(gone)
    assert (cell.scenario, cell.column, cell.verdict) == (
        "hiradix-multiturn", "inject:hiradix-host-indices-view", "error")
    assert cell.expected == "fail"
    assert cell.reasons[0].startswith(f"no usable summary: the run folder {gone} is missing")
    fixed = read_cell(tmp_path / "radix-steady" / "fixed")
    assert (fixed.scenario, fixed.column) == ("radix-steady", "fixed")
    assert judge_suite([gone]).exit_code() == 3
