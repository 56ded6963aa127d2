"""Result files: golden version-1 files load; damaged or foreign files are refused clearly."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.config import RunConfig, SamplerIntervals
from harness.errors import UsageError
from harness.runfiles.names import SUMMARY_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.summary import SUMMARY_VERSION, Summary, load_summary, write_summary
from leak_harness.cli import main

GOLDEN = Path(__file__).parent / "golden" / "run-v1"


def test_golden_v1_run_loads_into_rundata_and_summary() -> None:
    data, summary = load_samples(GOLDEN / "samples.jsonl"), load_summary(GOLDEN)
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
    assert summary.metrics["rss"].ci == (-3.0e6, 5.4e6)


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


def test_a_corrupt_middle_line_is_skipped_and_marked(tmp_path: Path) -> None:
    """RELIABILITY-3 case 26: one bad line in the middle cost every plot."""
    path = copy_golden(tmp_path) / "samples.jsonl"
    whole = len(load_samples(path).rss)
    lines = path.read_text().splitlines(keepends=True)
    rss_line = next(i for i, line in enumerate(lines) if '"type": "rss"' in line
                    or '"type":"rss"' in line)
    lines[rss_line] = '{"type":"rss",' + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    data = load_samples(path)
    marked = data.event("corrupt_line")
    assert marked is not None and marked["line"] == rss_line + 1
    assert len(data.rss) == whole - 1


def test_a_file_of_many_corrupt_lines_is_refused(tmp_path: Path) -> None:
    path = copy_golden(tmp_path) / "samples.jsonl"
    header = path.read_text().split("\n", 1)[0]
    path.write_text(header + "\n" + "not json\n" * 30, encoding="utf-8")
    with pytest.raises(UsageError, match=r"more than 20 lines that are not sample records "
                                         r"\(lines 2, 3, \.\.\.\)"):
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
    assert load_summary(tmp_path) == dataclasses.replace(original, version=SUMMARY_VERSION)
    data = json.loads((tmp_path / "summary.json").read_text())
    (tmp_path / "summary.json").write_text(json.dumps({**data, "version": 7}))
    with pytest.raises(UsageError, match="summary version 7; this leak-harness reads versions 1"):
        load_summary(tmp_path)


def golden_summary(version: int, tmp_path: Path) -> Summary:
    shutil.copy(GOLDEN.parent / f"summary-v{version}.json", tmp_path / SUMMARY_FILE)
    return load_summary(tmp_path)


def test_golden_summaries_of_every_version_decode_into_version_4(tmp_path: Path) -> None:
    """Decoding moves data and never recomputes it: what a version lacks is missing."""
    v1, v2, v3 = (golden_summary(v, tmp_path) for v in (1, 2, 3))
    assert [s.version for s in (v1, v2, v3)] == [1, 2, 3]
    assert v1.analysis is None and v1.fitted_line("rss") is None and v1.limits() == ()
    assert v1.run.ending == "finished" and v1.run.budgets is None
    for older in (v2, v3):  # the same run, written as version 2 and as version 3
        assert older.verdict == "leak" and older.metrics["rss_growth"].budget == "rss: 50 MB/h"
        assert older.run.rundir == "results/runs/mamba-lru-20261201-000000"
        assert older.run.window_s is not None and older.run.budgets is not None
        fit = older.fitted_line("rss")
        assert fit is not None and fit.basis == "all" and fit.per_h > 0
        assert older.cycle_paths() == ["TreeNode.mamba_prev -> TreeNode.parent -> (back)"]
    assert v2.limits() == () and v2.level_limit("work_list") is None  # version 3 added them
    detail = v2.series_detail("rss")
    assert v2.where_it_grows() == [] and detail is not None and detail.taken_off is None
    assert v3.level_limit("work_list") == 4.0 and v3.where_it_grows()
    write_summary(tmp_path, v3)  # written again, it is version 4 with the same facts
    assert load_summary(tmp_path) == dataclasses.replace(v3, version=SUMMARY_VERSION)


def test_reanalyse_judges_an_old_run_again_and_writes_version_4(tmp_path: Path) -> None:
    run = copy_golden(tmp_path)
    assert main(["report", "--reanalyse", str(run)]) == 0
    again = load_summary(run)
    assert again.version == SUMMARY_VERSION and again.analysis is not None
    assert again.run.budgets == ("rss: 2 GB/h", "ring: <= 256")
    assert again.level_limit("ring") == 256.0  # the analysis's parse, now stored


def test_summary_refuses_an_unknown_verdict() -> None:
    with pytest.raises(UsageError, match="unknown verdict 'fine'"):
        Summary("s", [], "fine", [], {}, None, 1.0, 1, "leak-harness run s")


def test_the_commit_under_test_is_the_targets_repository_else_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from harness.provenance import commit_under_test, git_commit

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


def test_report_judges_again_a_run_whose_summary_is_cut(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """RELIABILITY-3 cases 28 and 101: a summary cut in half left intact samples unjudged,
    and json's message was clipped ("Unterminated string starting at, line 553")."""
    from leak_harness.cli import main

    run = copy_golden(tmp_path)
    whole = (run / "summary.json").read_text()
    (run / "summary.json").write_text(whole[: len(whole) // 2], encoding="utf-8")
    assert main(["report", str(run)]) == 0
    said = capsys.readouterr().out
    assert "its summary is not valid JSON (" in said and " at line " in said, said
    assert "kept as summary.json.unreadable); analysed the samples again: " in said
    assert (run / "summary.json.unreadable").read_text() == whole[: len(whole) // 2]
    intact = tmp_path / "intact"
    shutil.copytree(GOLDEN, intact)
    assert main(["report", "--reanalyse", str(intact)]) == 0
    assert load_summary(run).verdict == load_summary(intact).verdict  # judged the same way
