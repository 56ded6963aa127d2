"""Comparisons: shared axes, and a growth ratio only where both runs grow."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runfiles.reader import open_run
from harness.runfiles.summary import RunFacts, Summary, write_summary
from harness.runfiles.summary_records import Metric
from reports.compare.report import write_comparison
from tests.reports.synth import MB, write_run, write_summary_only


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("compare")
    return {
        "broken": write_run(base / "broken", "demo", ["demo-unlink"], growth_per_h=400 * MB,
                            garbage_per_op=2.0),
        "fixed": write_run(base / "fixed", "demo"),
    }


def test_broken_vs_fixed_says_no_growth_instead_of_dividing(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    result = write_comparison(open_run(runs["broken"]), open_run(runs["fixed"]), tmp_path / "out")
    assert result.ratio is None
    assert "no growth" in result.sentence and "A grows at least" in result.sentence
    assert result.png is not None and result.png.read_bytes()[:4] == b"\x89PNG"
    assert "no growth" in result.html.read_text() and result.text.read_text().startswith("A: ")


def test_two_growing_runs_get_a_ratio(tmp_path: Path) -> None:
    a = write_summary_only(tmp_path / "a", "demo", ("x",), "leak", 400 * MB, (380 * MB, 420 * MB))
    b = write_summary_only(tmp_path / "b", "demo", ("y",), "leak", 100 * MB, (90 * MB, 110 * MB))
    result = write_comparison(open_run(a), open_run(b), tmp_path / "out")
    assert result.ratio == pytest.approx(4.0)
    assert "4x as fast" in result.sentence
    assert result.png is None  # neither folder has samples to draw


def test_zero_and_negative_growth_are_no_growth(tmp_path: Path) -> None:
    a = write_summary_only(tmp_path / "a", "demo", (), "pass", 0.0, (0.0, 0.0))
    b = write_summary_only(tmp_path / "b", "demo", (), "pass", -2 * MB, (-3 * MB, -1 * MB))
    result = write_comparison(open_run(a), open_run(b), tmp_path / "out")
    assert result.ratio is None
    assert result.sentence.count("no growth") == 2 and "Neither grows" in result.sentence


def heap_summary(rundir: Path, verdict: str, heap_per_h: float, rss_per_h: float) -> Path:
    """A run judged on heap and RSS: a leak the heap caught while RSS moved by chance."""

    rundir.mkdir(parents=True)
    heap_status = "leak" if verdict == "leak" else "pass"
    metrics = {
        "rss_growth": Metric(rss_per_h, "B/h", (rss_per_h - MB, rss_per_h + MB), "rss: 50 MB/h",
                             "pass"),
        "heap_growth": Metric(heap_per_h, "B/h", (heap_per_h - MB / 2, heap_per_h + MB / 2),
                              "heap: 10 MB/h", heap_status),
    }
    write_summary(rundir, Summary("demo", [], verdict, [verdict], metrics, None, 60.0, 1000,
                                  "leak-harness run demo", RunFacts(rundir=str(rundir))))
    return rundir


@pytest.mark.parametrize(("a", "b"), [("leak", "pass"), ("pass", "leak"), ("leak", "leak"),
                                      ("pass", "pass")])
def test_the_words_follow_the_verdicts_in_all_four_combinations(
    tmp_path: Path, a: str, b: str
) -> None:
    # The leak's heap grows 50 MB/h while its RSS happens to be flat; the healthy run's RSS
    # climbs 100 MB/h within its calibrated allowance and its heap is flat.
    shapes = {"leak": (50 * MB, 0.0), "pass": (0.0, 100 * MB)}
    first = heap_summary(tmp_path / "a", a, *shapes[a])
    second = heap_summary(tmp_path / "b", b, *shapes[b])
    sentence = write_comparison(open_run(first), open_run(second), tmp_path / "out").sentence
    a_words, rest = sentence.split("; ", 1)
    b_words = rest.split(". ", 1)[0]  # B's words end where the ratio sentence starts
    for side, words in ((a, a_words), (b, b_words)):
        if "leak" in (a, b):
            assert "· heap" in words  # compared on the series the leak was judged on
        if side == "leak":
            assert "over its budget" in words and "no growth" not in words, sentence
        else:
            assert "over its budget" not in words, sentence


def test_growth_a_budget_excused_is_not_called_within_it() -> None:
    """RELIABILITY-3 case 33: 'heap grows +139 MB/h, within its budget' beside a budget of
    10 MB/h, the run's allowance (a tree still filling) having excused it."""
    from harness.runfiles.facts import Growth
    from reports.render.growth import describe_growth

    excused = Growth("heap_floor_growth", 139e6, (55.7e6, 241e6), "B/h", "pass")
    unsure = Growth("heap_floor_growth", 139e6, (55.7e6, 241e6), "B/h", "suspicious")
    assert describe_growth(excused).endswith(", within its budget after the run's allowances")
    assert describe_growth(unsure).endswith(", not confirmed over its budget")
    assert "within its budget" not in describe_growth(unsure)
