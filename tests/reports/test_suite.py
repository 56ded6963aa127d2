"""Suite reports: the matrix, JUnit and the text summary, from shards of run folders.

The suite is judged by :mod:`harness.suite` and rendered by :mod:`reports.suite`."""

from __future__ import annotations

import html
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.runfiles.names import REPORT_FILE
from harness.suite import Suite, build_cells, judge_suite
from leak_harness.cli.report_drawer import draw_missing_reports
from reports.suite.model import SuitePaths, cell_signal
from reports.suite.report import write_suite_report
from tests.reports.synth import GOLDEN, MB, write_run, write_summary_only


def written(rundirs: list[Path], out: Path, write_missing_reports: bool = True,
            not_applicable: Sequence[str] = ()) -> tuple[Suite, SuitePaths]:
    """The suite judged from ``rundirs``, and the report written of it."""
    suite = judge_suite(rundirs)
    if write_missing_reports:  # as the face does before it writes the suite report
        draw_missing_reports(suite)
    return suite, write_suite_report(suite, out, not_applicable=not_applicable)


def shards(tmp_path: Path) -> list[Path]:
    """Two scenarios, fixed and injected each, spread over two shard folders; one cell wrong."""
    one, two = tmp_path / "shard-1", tmp_path / "shard-2"
    return [
        write_summary_only(one / "a-fixed", "mamba-lru", (), "pass", 1 * MB),
        write_summary_only(one / "a-inject", "mamba-lru", ("mamba-lru-unlink",), "leak",
                           400 * MB),
        write_summary_only(two / "b-fixed", "swa-lru", (), "leak", 600 * MB),  # wrong
        write_summary_only(two / "b-inject", "swa-lru", ("swa-lru-unlink",), "crashed"),
    ]


def test_matrix_junit_and_text_from_several_shards(tmp_path: Path) -> None:
    suite, report = written(shards(tmp_path), tmp_path / "suite", write_missing_reports=False)
    assert [(c.scenario, c.column, c.correct) for c in suite.cells] == [
        ("mamba-lru", "fixed", True),
        ("mamba-lru", "inject:mamba-lru-unlink", True),
        ("swa-lru", "fixed", False),
        ("swa-lru", "inject:swa-lru-unlink", True),
    ]
    assert not suite.ok and [c.scenario for c in suite.wrong] == ["swa-lru"]
    assert suite.exit_code() == 1
    index = report.index.read_text()
    assert index.count('class="wrong"') == 1 and index.count('class="right"') == 3
    assert "<b>swa-lru-unlink</b>" in index and "expected pass" in index
    text = report.summary.read_text()
    assert "1 WRONG" in text and "swa-lru: leak." in text


def test_a_suspicious_fixed_cell_is_right_as_run_exits_0_on_it(tmp_path: Path) -> None:
    cell = write_summary_only(tmp_path / "fixed", "swa-lru", (), "suspicious", 60 * MB)
    suite, _ = written([cell], tmp_path / "suite", write_missing_reports=False)
    assert suite.ok and suite.cells[0].correct and suite.exit_code() == 0


def test_junit_parses_with_one_testcase_per_cell(tmp_path: Path) -> None:
    _, report = written(shards(tmp_path), tmp_path / "suite", write_missing_reports=False)
    root = ET.parse(report.junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert {(c.get("classname"), c.get("name")) for c in cases} == {
        ("leak-harness.mamba-lru", "fixed"),
        ("leak-harness.mamba-lru", "inject:mamba-lru-unlink"),
        ("leak-harness.swa-lru", "fixed"),
        ("leak-harness.swa-lru", "inject:swa-lru-unlink"),
    }
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and failed[0].get("time") == "600.000"
    failure = failed[0].find("failure")
    assert failure is not None and "swa-lru: leak." in (failure.text or "")


def test_cells_link_to_run_reports_written_on_the_way(tmp_path: Path) -> None:
    golden = tmp_path / "nightly" / "golden"
    shutil.copytree(GOLDEN, golden)
    suite, report = written([golden], tmp_path / "out")
    assert (golden / REPORT_FILE).exists()
    assert 'href="../nightly/golden/report.html"' in report.index.read_text()
    assert suite.ok


def test_an_injected_crash_the_fixed_run_shared_is_not_a_detection(tmp_path: Path) -> None:
    runs = [write_summary_only(tmp_path / "f", "mamba-lru", (), "crashed"),
            write_summary_only(tmp_path / "i", "mamba-lru", ("mamba-lru-unlink",), "crashed")]
    cells = build_cells(runs, {})
    assert [c.correct for c in cells] == [False, False]
    assert "not a detection" in cells[1].why_wrong
    assert judge_suite(runs).exit_code() == 1


def test_expected_overrides_and_unreadable_folders(tmp_path: Path) -> None:
    crashed = write_summary_only(tmp_path / "x", "himamba", ("stale-leaf",), "crashed")
    broken = tmp_path / "broken"
    broken.mkdir()
    cells = build_cells([crashed, broken], {"himamba/inject:stale-leaf": "leak"})
    by_name = {c.scenario: c for c in cells}
    assert not by_name["himamba"].correct  # the override wanted "leak" exactly
    assert by_name["broken"].verdict == "error" and not by_name["broken"].correct
    with pytest.raises(ValueError, match="expected outcome"):
        build_cells([crashed], {"himamba": "caught"})


def test_repeated_cells_are_numbered(tmp_path: Path) -> None:
    runs = [write_summary_only(tmp_path / f"r{i}", "radix", (), "pass") for i in range(2)]
    assert [c.name for c in build_cells(runs, {})] == ["fixed", "fixed (run 2)"]


def test_a_failing_night_still_gets_its_trends_and_the_index_links_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from leak_harness.cli import main

    shards(tmp_path)  # one cell wrong: the merge exits 1
    out, history = tmp_path / "merged", tmp_path / "history.sqlite"
    code = main(["report", str(tmp_path / "shard-1"), str(tmp_path / "shard-2"),
                 "--out", str(out), "--history", str(history)])
    assert code == 1
    plots = sorted((out / "trends").glob("*.png"))
    assert plots, capsys.readouterr().out
    index = (out / "index.html").read_text()
    assert "<h2>Trends</h2>" in index or ">Trends<" in index
    assert all(f'href="trends/{p.name}"' in index for p in plots)


def test_the_index_names_each_cells_signal_rate_and_culprit_without_empty_cells(
    tmp_path: Path,
) -> None:
    runs = [write_run(tmp_path / "a" / "fixed", "demo-cache", duration_s=240.0),
            write_run(tmp_path / "a" / "inject", "demo-cache", ["demo-unlink"],
                      growth_per_h=400 * MB, garbage_per_op=2.0),
            write_run(tmp_path / "b" / "fixed", "demo-idle", duration_s=240.0)]
    suite, report = written(runs, tmp_path / "suite", write_missing_reports=False)
    index = html.unescape(report.index.read_text())
    assert "3 budgets held" in index  # each fixed cell
    leak = next(c for c in suite.cells if c.column != "fixed")
    signal = cell_signal(leak)
    # The confirmed budget convicts, not the suspicious RSS beside it.
    assert leak.verdict == "leak" and signal.startswith("cyclic_garbage +")
    assert "over 'cyclic_garbage: 0.5 /kop'" in signal and signal in index
    assert "<b>demo-unlink</b>" in index and "nothing grows" not in index  # a pass names none
    assert "no regression injected in this scenario" in index  # demo-idle's row
    assert ">–<" not in index and 'rowspan' not in index  # one regression each: no spans


def test_cells_that_did_not_run_are_listed_and_skipped_in_junit(tmp_path: Path) -> None:
    runs = [write_summary_only(tmp_path / "f", "radix", (), "pass", 1 * MB)]
    not_run = ["radix[inject:split-views]: not started (interrupted)",
               "mamba[fixed]: not started (interrupted)"]
    _, report = written(runs, tmp_path / "suite", write_missing_reports=False,
                        not_applicable=not_run)
    assert all(sentence in html.unescape(report.index.read_text()) for sentence in not_run)
    suite = ET.parse(report.junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("skipped")) == ("3", "2")
    skipped = [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")
               if c.find("skipped") is not None]
    assert skipped == [("leak-harness.radix", "inject:split-views"),
                       ("leak-harness.mamba", "fixed")]
