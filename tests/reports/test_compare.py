"""Comparisons: shared axes, and a growth ratio only where both runs grow."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    result = write_comparison(runs["broken"], runs["fixed"], tmp_path / "out")
    assert result.ratio is None
    assert "no growth" in result.sentence and "A grows at least" in result.sentence
    assert result.png is not None and result.png.read_bytes()[:4] == b"\x89PNG"
    assert "no growth" in result.html.read_text() and result.text.read_text().startswith("A: ")


def test_two_growing_runs_get_a_ratio(tmp_path: Path) -> None:
    a = write_summary_only(tmp_path / "a", "demo", ("x",), "leak", 400 * MB, (380 * MB, 420 * MB))
    b = write_summary_only(tmp_path / "b", "demo", ("y",), "leak", 100 * MB, (90 * MB, 110 * MB))
    result = write_comparison(a, b, tmp_path / "out")
    assert result.ratio == pytest.approx(4.0)
    assert "4x as fast" in result.sentence
    assert result.png is None  # neither folder has samples to draw


def test_zero_and_negative_growth_are_no_growth(tmp_path: Path) -> None:
    a = write_summary_only(tmp_path / "a", "demo", (), "pass", 0.0, (0.0, 0.0))
    b = write_summary_only(tmp_path / "b", "demo", (), "pass", -2 * MB, (-3 * MB, -1 * MB))
    result = write_comparison(a, b, tmp_path / "out")
    assert result.ratio is None
    assert result.sentence.count("no growth") == 2 and "Neither grows" in result.sentence
