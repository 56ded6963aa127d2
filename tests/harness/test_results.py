"""Result files: golden version-1 files load; damaged or foreign files are refused clearly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis.upgrade import upgrade, upgrade_from_v1
from harness.config import RunConfig, SamplerIntervals
from harness.errors import UsageError
from harness.runfiles.names import SUMMARY_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.summary import SUMMARY_VERSION, Summary, load_run, load_summary, write_summary

GOLDEN = Path(__file__).parent / "golden" / "run-v1"


def test_golden_v1_run_loads_into_rundata_and_summary() -> None:
    data, summary = load_run(GOLDEN)
    assert data.header["env"]["python"] and data.header["config"]["seed"] == 0
    assert list(data.rss.t) == [0.0, 0.1, 0.5, 1.0, 2.0, 2.02] and data.rss.unit == "B"
    assert list(data.uss.v) == [18874368, 18878464, 18882560, 18636800]
    assert data.ops.v[-1] == 1739 and data.warmup_end_s == 0.5
    assert list(data.gauges["ring"].v) == [0.0, 256.0, 256.0]
    assert [e["gen"] for e in data.gc_events] == [0, 2]
    assert data.garbage_windows[0]["by_type"] == {"Node": 240}
    assert data.object_windows[-1]["growth"] == {"Node": 120}
    assert [e["name"] for e in data.events] == ["start", "warmup_end", "loop_end", "malloc_trim",
                                                "end"]
    assert summary.verdict == "pass" and summary.ops == 1739
    assert summary.metrics["rss"]["ci"] == [-3.0e6, 5.4e6]


def test_golden_config_round_trips_through_runconfig() -> None:
    data = load_samples(GOLDEN / "samples.jsonl")
    config = RunConfig.from_dict(data.header["config"])
    golden = data.header["config"]
    # A newer harness adds fields with defaults (new samplers' intervals): the
    # golden file's own values all come back, the new ones at their defaults.
    dumped = config.to_dict()
    assert {k: v for k, v in dumped.items() if k in golden and k not in ("intervals", "samplers")
            } == {k: v for k, v in golden.items() if k not in ("intervals", "samplers")}
    assert dumped["skippable_budgets"] == []  # a newer field, at its default
    assert {k: dumped["intervals"][k] for k in golden["intervals"]} == golden["intervals"]
    assert dumped["samplers"] == golden["samplers"]
    assert dumped["intervals"]["heap_s"] == SamplerIntervals().heap_s
    assert dumped["intervals"]["alloc_window_s"] == SamplerIntervals().alloc_window_s
    assert config.budget_texts == ("rss: 2 GB/h", "ring: <= 256")


def copy_golden(tmp_path: Path) -> Path:
    shutil.copytree(GOLDEN, tmp_path / "run")
    return tmp_path / "run"


def test_truncated_last_line_is_tolerated_and_reported(tmp_path: Path) -> None:
    path = copy_golden(tmp_path) / "samples.jsonl"
    path.write_text(path.read_text() + '{"type":"rss","t":2.1,"rss":2064', encoding="utf-8")
    data = load_samples(path)
    truncated = data.event("truncated")
    assert truncated is not None and truncated["line"] == 22
    assert len(data.rss) == 6  # the cut line is not half-read


def test_corrupt_middle_line_names_its_number(tmp_path: Path) -> None:
    path = copy_golden(tmp_path) / "samples.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[4] = '{"type":"rss",' + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(UsageError, match=r"samples.jsonl line 5 is not valid JSON"):
        load_samples(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, r"samples version 2; this leak-harness reads version 1 only"),
        ({"schema": "other/thing"}, r"has schema 'other/thing'"),
        ({"type": "rss"}, r"does not start with a leak-harness header"),
    ],
)
def test_foreign_headers_are_refused(tmp_path: Path, change: dict[str, object],
                                     message: str) -> None:
    path = copy_golden(tmp_path) / "samples.jsonl"
    first, rest = path.read_text().split("\n", 1)
    path.write_text(json.dumps({**json.loads(first), **change}) + "\n" + rest, encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        load_samples(path)


def test_empty_samples_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "samples.jsonl").write_text("")
    with pytest.raises(UsageError, match="is empty"):
        load_samples(tmp_path / "samples.jsonl")


def test_summary_round_trips_and_unknown_versions_are_refused(tmp_path: Path) -> None:
    original = load_summary(GOLDEN)
    write_summary(tmp_path, original)
    assert load_summary(tmp_path) == original
    data = json.loads((tmp_path / "summary.json").read_text())
    (tmp_path / "summary.json").write_text(json.dumps({**data, "version": 7}))
    with pytest.raises(UsageError, match="summary version 7; this leak-harness reads versions 1"):
        load_summary(tmp_path)


def test_v1_summary_is_upgraded_in_memory_from_its_samples(tmp_path: Path) -> None:
    data, summary = load_run(GOLDEN)
    assert summary.version == 1
    upgraded = upgrade(summary, data)
    assert upgraded.version == SUMMARY_VERSION
    assert (upgraded.verdict, upgraded.metrics) == (summary.verdict, summary.metrics)
    assert isinstance(upgraded.extra["analysis"]["series"], dict)  # re-analysed, with details
    assert upgrade(summary, None) == summary  # no samples: nothing to re-analyse
    assert upgrade(upgraded, None) is upgraded  # already current
    write_summary(tmp_path, upgraded)
    assert load_summary(tmp_path) == upgraded
    assert json.loads((tmp_path / SUMMARY_FILE).read_text())["version"] == SUMMARY_VERSION


def test_v1_upgrade_keeps_the_summary_when_its_budgets_cannot_be_analysed() -> None:
    data, summary = load_run(GOLDEN)
    data.header["config"]["budgets"] = ["rss: fast"]
    assert upgrade_from_v1(summary, data) == summary


def test_summary_refuses_an_unknown_verdict() -> None:
    with pytest.raises(UsageError, match="unknown verdict 'fine'"):
        Summary("s", [], "fine", [], {}, None, 1.0, 1, "leak-harness run s")


def test_the_commit_under_test_is_the_targets_repository_else_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from harness.runfiles.samples import commit_under_test, git_commit

    package = tmp_path / "mycache"
    package.mkdir()
    (package / "__init__.py").write_text("def make(**options): ...\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=tmp_path, check=True)
    theirs = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout.strip()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert commit_under_test("mycache:make") == theirs
    assert commit_under_test(None) == git_commit() != theirs
    monkeypatch.chdir(tmp_path)  # another repository's folder must not leak in
    assert commit_under_test(None) == git_commit() != theirs


def test_the_upgrade_adds_parsed_limits_and_the_pages_tables() -> None:
    data, summary = load_run(GOLDEN)
    upgraded = upgrade(summary, data)
    limits = {row["text"]: row for row in upgraded.extra["analysis"]["limits"]}
    assert limits["ring: <= 256"]["kind"] == "level" and limits["ring: <= 256"]["limit"] == 256.0
    assert limits["rss: 2 GB/h"]["unit"] == "B/h" and limits["rss: 2 GB/h"]["limit"] == 2e9
    assert [row["type"] for row in upgraded.garbage_by_type()] == ["Node"]
    assert upgraded.cycles() == []  # the golden windows explained no cycle
    without_samples = upgrade(summary, None)
    assert without_samples.version == 1  # a v1 summary needs its samples to go further
