"""Run reports: every file written, the page says what the summary says."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from reports.run_report import write_run_report
from tests.reports.synth import GOLDEN, MB, write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def leaking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rundir = tmp_path_factory.mktemp("runs") / "leaking"
    write_run(rundir, "demo-cache", ["demo-unlink"], growth_per_h=400 * MB, garbage_per_op=2.0)
    write_run_report(rundir)
    return rundir


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rundir = tmp_path_factory.mktemp("runs") / "flat"
    write_run(rundir, "demo-cache")
    write_run_report(rundir)
    return rundir


def page_text(rundir: Path) -> str:
    return html.unescape((rundir / "report.html").read_text(encoding="utf-8"))


def test_every_file_of_a_leaking_run_is_written(leaking: Path) -> None:
    for name in ("rss.png", "gc.png", "garbage.png", "gauges.png"):
        assert (leaking / name).read_bytes()[:8] == PNG_MAGIC, name
    assert (leaking / "report.html").exists()


def test_page_states_verdict_reasons_metrics_cycle_and_command(leaking: Path) -> None:
    text = page_text(leaking)
    summary = json.loads((leaking / "summary.json").read_text())
    assert summary["verdict"] == "leak"
    assert '<span class="badge"' in text and ">leak</span>" in text
    for reason in summary["reasons"]:
        assert reason in text
    for metric in ("rss_growth", "cyclic_garbage", "work_list_max"):
        assert metric in text
    assert "TreeNode.mamba_prev -> TreeNode.parent -> (back)" in text
    assert summary["command"] in text
    assert 'src="rss.png"' in text  # relative, so the folder can be moved or served


def test_a_flat_run_has_no_garbage_plot_and_says_why(flat: Path) -> None:
    assert not (flat / "garbage.png").exists()
    text = page_text(flat)
    assert ">pass</span>" in text
    assert "No garbage window found cyclic garbage" in text
    assert "No reference cycle was explained" in text


def test_a_stale_plot_is_removed_when_rewritten(flat: Path) -> None:
    (flat / "garbage.png").write_bytes(PNG_MAGIC)
    write_run_report(flat)
    assert not (flat / "garbage.png").exists()


def test_golden_v1_run_renders(tmp_path: Path) -> None:
    rundir = tmp_path / "golden"
    shutil.copytree(GOLDEN, rundir)
    write_run_report(rundir)
    text = page_text(rundir)
    assert ">pass</span>" in text and "leak-harness run tests.harness.fixtures" in text
    assert (rundir / "rss.png").exists() and (rundir / "gauges.png").exists()


def test_run_without_readable_samples_still_gets_a_page(tmp_path: Path) -> None:
    rundir = write_run(tmp_path / "crashed", verdict="crashed",
                       reasons=["the scenario raised: ImportError: no module named x."],
                       duration_s=120.0)
    (rundir / "samples.jsonl").write_text("")
    (rundir / "traceback.txt").write_text("Traceback ...")
    write_run_report(rundir)
    text = page_text(rundir)
    assert ">crashed</span>" in text and "ImportError: no module named x." in text
    assert "The samples could not be read" in text
    assert 'href="traceback.txt"' in text
    assert not (rundir / "rss.png").exists()


def test_html_escapes_what_comes_from_result_files(tmp_path: Path) -> None:
    rundir = write_run(tmp_path / "odd", "demo<script>", reasons=["a < b & c"], duration_s=120.0)
    write_run_report(rundir)
    raw = (rundir / "report.html").read_text()
    assert "<script>" not in raw and "a &lt; b &amp; c" in raw
