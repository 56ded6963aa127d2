"""check --plan and a shard's first line: which shard a CI machine resolved to, its cells
and their expected time, said before anything runs (``--plan`` runs nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.parent.shards import resolve_shard
from leak_harness.cli import check, main


@pytest.fixture()
def ran(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The cells each check would have run; nothing starts."""
    runs: list[list[str]] = []

    def run_cells(self: Any, cells: list[Any], *args: Any) -> tuple[int, None]:
        runs.append([c.label for c in cells])
        return 0, None

    monkeypatch.setattr(check.CheckCommand, "_run_cells", run_cells)
    return runs


def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LEAK_HARNESS_SHARD_INDEX", "LEAK_HARNESS_SHARD_COUNT", "CI_NODE_INDEX",
                 "CI_NODE_TOTAL", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT",
                 "JOB_COMPLETION_INDEX"):
        monkeypatch.delenv(name, raising=False)


def test_plan_lists_the_shards_cells_with_expected_time_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    ran: list[list[str]],
) -> None:
    no_ci(monkeypatch)
    monkeypatch.setenv("CI_NODE_INDEX", "2")
    monkeypatch.setenv("CI_NODE_TOTAL", "4")
    out = tmp_path / "out"
    code = main(["check", "--shard", "auto", "--plan", "--out", str(out),
                 "--history", str(tmp_path / "none.sqlite")])
    text = capsys.readouterr().out
    assert code == 0 and not ran and not out.exists()
    head, *rows, tail = text.splitlines()
    assert head.startswith("plan: shard 2/4 (from CI_NODE_INDEX=2 counted from 1, "
                           "CI_NODE_TOTAL=4): ")
    assert len(rows) == int(head.split(": ")[2].split()[0]) > 0
    assert all("its duration 20s" in row for row in rows)
    assert tail.startswith("expected: ") and "of wall time at -j 1" in tail


def test_plan_takes_a_cells_length_from_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(check, "typical_seconds",
                        lambda db: {("radix-steady", "fixed"): 42.0})
    assert main(["check", "-k", "radix-steady", "--plan", "-j", "2"]) == 0
    text = capsys.readouterr().out
    assert "radix-steady[fixed]" in text and "42s  the median of its recent runs" in text


@pytest.mark.parametrize(("env", "said"), [
    ({"CI_NODE_INDEX": "4", "CI_NODE_TOTAL": "4"},
     "shard 4/4 (from CI_NODE_INDEX=4 counted from 1"),
    ({"JOB_COMPLETION_INDEX": "0", "LEAK_HARNESS_SHARD_COUNT": "4"},
     "shard 1/4 (from JOB_COMPLETION_INDEX=0 counted from 0"),
    ({"BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "4"},
     "shard 4/4 (from BUILDKITE_PARALLEL_JOB=3 counted from 0"),
])
def test_a_shard_says_which_it_resolved_to_and_its_cells_first(
    env: dict[str, str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], ran: list[list[str]],
) -> None:
    no_ci(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["check", "--shard", "auto", "--no-history", "--out", str(tmp_path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(said)
    assert f": {', '.join(ran[0])}; expected about " in first
    assert first.endswith("of wall time at -j 1 (--plan lists each cell's)")


def test_a_check_says_how_long_it_should_take_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    ran: list[list[str]],
) -> None:
    monkeypatch.setattr(check, "typical_seconds",
                        lambda db: {("radix-steady", "fixed"): 42.0})
    assert main(["check", "-k", "radix-steady", "-j", "2", "--out", str(tmp_path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "1 cell; expected about 42s of wall time at -j 2 (--plan lists each cell's)"


def test_an_out_of_range_ci_index_names_its_variable_and_base() -> None:
    with pytest.raises(Exception, match="CI_NODE_INDEX counts from 1, so it must be 1 to 4"):
        resolve_shard("auto", {"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "4"})
    with pytest.raises(Exception, match="LEAK_HARNESS_SHARD_INDEX counts from 1"):
        resolve_shard("auto", {"LEAK_HARNESS_SHARD_INDEX": "0", "LEAK_HARNESS_SHARD_COUNT": "4"})
    assert str(resolve_shard("3/4")) == "shard 3/4"


def test_with_json_the_shard_line_goes_to_stderr_and_stdout_stays_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    ran: list[list[str]],
) -> None:
    no_ci(monkeypatch)
    monkeypatch.setattr(check, "suite_json", lambda suite, code: {"exit_code": code})
    assert main(["check", "--shard", "1/4", "--json", "--no-history",
                 "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == '{\n  "exit_code": 0\n}'
    assert captured.err.startswith("shard 1/4: ")


def test_an_empty_shard_says_so_and_with_json_prints_an_empty_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    ran: list[list[str]],
) -> None:
    no_ci(monkeypatch)
    assert main(["check", "-k", "radix-steady", "--shard", "2/2", "--json", "--no-history",
                 "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert not ran and json.loads(captured.out) == {"ok": True, "exit_code": 0, "cells": []}
    assert captured.err == "shard 2/2: no cells (1 cells over 2 shards).\n"
