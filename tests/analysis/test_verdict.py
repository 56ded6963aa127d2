"""Verdict rules one by one, their combination, and time to detect."""

from __future__ import annotations

import itertools

import pytest

from harness.analysis.shapes import Level
from harness.analysis.verdict import (
    Judgement,
    combine,
    detection_grid,
    judge_level,
    judge_rate,
    no_data,
    time_to_detect,
    worst,
)
from harness.budgets import parse_budget

RSS = parse_budget("rss: 50 MB/h")
WORK = parse_budget("work_list: <= 4")


@pytest.mark.parametrize(
    ("estimate", "ci", "status", "rule"),
    [
        (3.7e9, (3.5e9, 3.9e9), "leak", "confirmed-growth"),
        (80e6, (30e6, 130e6), "suspicious", "unconfirmed-growth"),
        (80e6, None, "suspicious", "unconfirmed-growth"),
        (10e6, (-5e6, 25e6), "pass", "within-budget"),
        (40e6, (-200e6, 280e6), "pass", "within-budget"),
        (-1e9, (-2e9, -0.5e9), "pass", "within-budget"),
    ],
)
def test_rate_rules(
    estimate: float, ci: tuple[float, float] | None, status: str, rule: str
) -> None:
    judged = judge_rate("rss growth", estimate, ci, RSS)
    assert (judged.status, judged.rule) == (status, rule)
    assert "rss growth" in judged.reason and "'rss: 50 MB/h'" in judged.reason


def test_reasons_quote_the_interval_in_display_units() -> None:
    judged = judge_rate("rss growth", 3.7e9, (3.5e9, 3.9e9), RSS)
    assert judged.reason == (
        "rss growth 3.7 GB/h (95% CI 3.5 GB/h to 3.9 GB/h) is above 'rss: 50 MB/h'."
    )


def test_too_noisy_is_said_not_hidden() -> None:
    wide = judge_rate("rss growth", 40e6, (-200e6, 280e6), RSS)
    assert "too noisy to judge" in wide.reason
    narrow = judge_rate("rss growth", 40e6, (35e6, 45e6), RSS)
    assert "too noisy" not in narrow.reason
    unconfirmed = judge_rate("rss growth", 60e6, (-100e6, 220e6), RSS)
    assert unconfirmed.status == "suspicious" and "too noisy to judge" in unconfirmed.reason


def test_level_rules_need_a_sustained_value() -> None:
    assert judge_level("work_list", Level(peak=900.0, sustained=880.0), WORK).status == "leak"
    spike = judge_level("work_list", Level(peak=6.0, sustained=2.0), WORK)
    assert (spike.status, spike.rule) == ("suspicious", "spike-level")
    fine = judge_level("work_list", Level(peak=4.0, sustained=2.0), WORK)
    assert (fine.status, fine.rule) == ("pass", "within-level")


def test_combine_takes_the_worst_and_lists_it_first() -> None:
    judgements = [
        Judgement("pass", "within-budget", "a"),
        Judgement("leak", "confirmed-growth", "b"),
        Judgement("suspicious", "unconfirmed-growth", "c"),
    ]
    assert combine(judgements) == ("leak", ["b", "c", "a"])
    assert combine([]) == ("pass", [])
    assert combine([no_data("rss", "no samples."), judgements[0]])[0] == "error"
    assert worst(["pass", "error", "suspicious"]) == "error"


def test_process_verdicts_override_and_keep_the_data_reasons() -> None:
    verdict, reasons = combine(
        [Judgement("leak", "confirmed-growth", "grew")], "crashed", "AssertionError in insert"
    )
    assert (verdict, reasons) == ("crashed", ["AssertionError in insert", "grew"])
    assert combine([], "hung")[1] == ["the worker process ended: hung."]
    with pytest.raises(ValueError, match="is not one of"):
        combine([], "exploded")


def test_detection_grid_is_geometric_and_ends_at_the_end() -> None:
    grid = detection_grid(10.0, 10.0 + 6400.0)
    assert grid[0] == pytest.approx(110.0) and grid[-1] == pytest.approx(6410.0)
    ratios = [(b - 10.0) / (a - 10.0) for a, b in itertools.pairwise(grid)]
    assert max(ratios) == pytest.approx(min(ratios))
    assert detection_grid(5.0, 5.0) == [5.0]


def test_time_to_detect_is_where_the_verdict_started_to_hold() -> None:
    calls: list[float] = []

    def status_at(end: float) -> str:
        calls.append(end)
        return "leak" if end >= 40 or end == 10 else "pass"

    ends = [10.0, 20.0, 40.0, 80.0, 160.0]
    assert time_to_detect(ends, status_at, "leak") == 40.0  # the flag at 10 did not last
    assert calls == [160.0, 80.0, 40.0, 20.0]  # walked back, stopped at the first miss
    assert time_to_detect(ends, lambda end: "pass", "leak") is None
