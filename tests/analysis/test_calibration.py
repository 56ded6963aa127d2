"""The calibration: healthy growth stored as data, interpolated, and judged against."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.calibration import (
    CALIBRATION_FILE,
    Calibration,
    healthy_amount,
    load_calibration,
    parse,
)
from harness.analysis.verdict import Allowance, judge_rate
from harness.analysis.windows import held_back
from harness.budgets import parse_budget
from harness.runfiles.rundata import Series
from tests.analysis.synth import MB

POINTS = [(18.0, 2 * MB), (58.0, 3 * MB)]


def test_the_amount_is_the_most_a_run_as_long_grew_then_grows_slowly_past_the_longest() -> None:
    assert healthy_amount(POINTS, 18.0) == 3 * MB  # a 58 s window holds an 18 s one's steps
    assert healthy_amount(POINTS, 5.0) == 3 * MB  # a short window can hold all of it
    assert healthy_amount([(590.0, 1 * MB)], 20.0) == 1 * MB  # shorter than any: as it is
    assert healthy_amount(POINTS, 58.0) == 3 * MB
    assert healthy_amount(POINTS, 58.0 * 4) == pytest.approx(6 * MB)  # square root beyond
    assert healthy_amount([], 20.0) == 0.0


def test_a_short_windows_wander_does_not_speak_for_a_long_window() -> None:
    points = [(18.0, 5 * MB), (58.0, 3 * MB), (590.0, 1 * MB)]
    assert healthy_amount(points, 18.0) == 5 * MB
    assert healthy_amount(points, 45.0) == 3 * MB  # the 58 s windows only
    assert healthy_amount(points, 590.0) == 1 * MB  # the 590 s window alone
    assert healthy_amount(points[:2], 600.0) == pytest.approx(3 * MB * (600 / 58) ** 0.5)
    # between measured lengths: the 58 s windows' amount, carried, but never above
    # what the longer windows grew (they hold all of a shorter window's fill)
    assert healthy_amount([*points[:2], (590.0, 9 * MB)], 100.0) == pytest.approx(
        3 * MB * (100 / 58) ** 0.5)
    assert healthy_amount(points, 100.0) == 1 * MB
    assert healthy_amount([(18.0, 4 * MB), (600.0, 4 * MB)], 398.0) == 4 * MB


def test_a_long_windows_fill_does_not_speak_for_a_much_shorter_window() -> None:
    """Seen: 10-minute points of Python blocks (50,000 over 500 s) allowed a 60 s
    window 3.3M blocks/h, and a 50 MB/h dict leak passed."""
    points = [(18.0, 12_000.0), (58.0, 10_000.0), (496.0, 53_000.0)]
    assert healthy_amount(points, 58.0) == 10_000.0
    assert healthy_amount(points, 450.0) == 53_000.0


def test_a_scenario_without_points_of_its_own_takes_the_largest_of_all() -> None:
    calibration = Calibration({"rss": {"*": POINTS, "radix-steady": [(18.0, 1 * MB)]}})
    assert calibration.allowance("rss", "radix-steady", 18.0) == 1 * MB
    assert calibration.allowance("rss", "my-scenario", 18.0) == 3 * MB
    assert calibration.measured("rss", "radix-steady")
    assert not calibration.measured("rss", "my-scenario")
    assert calibration.allowance("heap", "radix-steady", 18.0) == 0.0


def test_the_shipped_calibration_loads_and_covers_the_judged_signals() -> None:
    calibration = load_calibration()
    for signal in ("rss", "heap", "py_blocks"):
        assert calibration.points(signal, "*"), f"no healthy growth measured for {signal}"


def test_a_malformed_calibration_is_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a leak-harness calibration"):
        parse({"format": 99}, "x.json")
    with pytest.raises(ValueError, match="not a finite window"):
        parse({"format": 1, "signals": {"rss": {"*": [[0, 1]]}}}, "x.json")
    assert json.loads(CALIBRATION_FILE.read_text())["format"] == 1


class TestJudgedOnTheExcess:
    budget = parse_budget("rss: 50 MB/h")
    healthy = Allowance(amount=1 * MB, span_s=18.0, source="the fixed radix-steady")  # 200 MB/h

    def test_growth_a_healthy_run_shows_passes_and_the_reason_says_how_much(self) -> None:
        judged = judge_rate("rss", 95 * MB, (78 * MB, 147 * MB), self.budget, self.healthy)
        assert judged.status == "pass"
        assert "less the 200 MB/h the fixed radix-steady shows by itself (1 MB over 18s)" in (
            judged.reason)

    def test_an_interval_above_budget_plus_allowance_is_a_leak(self) -> None:
        judged = judge_rate("rss", 400 * MB, (300 * MB, 500 * MB), self.budget, self.healthy)
        assert judged.status == "leak" and judged.rule == "confirmed-growth"

    def test_straddling_is_suspicious_and_says_what_would_settle_it(self) -> None:
        judged = judge_rate("rss", 400 * MB, (100 * MB, 700 * MB), self.budget, self.healthy)
        assert judged.status == "suspicious"
        assert "a run of about 36s would settle it" in judged.reason  # 18 s * 300 / 150

    def test_without_allowance_the_budget_alone_decides(self) -> None:
        judged = judge_rate("heap", 60 * MB, (55 * MB, 65 * MB), self.budget, None)
        assert judged.status == "leak"
        assert "by itself" not in judged.reason


def test_what_the_harness_collections_released_is_added_back_to_later_samples() -> None:
    t = np.arange(10, dtype=np.float64)
    heap = Series(t, np.full(10, 100.0), "B")
    windows = [{"t": 3.0, "released": {"heap": 40}}, {"t": 6.5, "released": {"py_blocks": 9}},
               {"t": 7.0, "released": {"heap": 5}}]
    held = held_back(heap, windows, "heap")
    assert held.v.tolist() == [100, 100, 100, 100, 140, 140, 140, 140, 145, 145]
    assert held_back(heap, [], "heap") is heap


def test_a_target_run_takes_its_own_points_and_the_references_when_it_has_none() -> None:
    calibration = Calibration({"heap": {"radix-steady": [(18.0, 1 * MB)],
                                        "radix-steady@sglang": [(18.0, 4 * MB)],
                                        "*": [(18.0, 2 * MB)]}})
    assert calibration.allowance("heap", "radix-steady", 18.0, "sglang") == 4 * MB
    assert calibration.measured_as("heap", "radix-steady", "sglang") == "radix-steady@sglang"
    assert calibration.allowance("heap", "radix-steady", 18.0) == 1 * MB  # the reference's
    assert calibration.allowance("heap", "radix-steady", 18.0, "my.cache:make") == 1 * MB
    assert calibration.allowance("heap", "mamba-lru", 18.0, "sglang") == 2 * MB  # "*"
    assert calibration.measured_as("heap", "mamba-lru", "sglang") is None
