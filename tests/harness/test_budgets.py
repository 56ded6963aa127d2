"""Budget strings: every accepted form and a clear sentence for each refusal."""

from __future__ import annotations

import pytest

from harness.budgets import Budget, parse_budget


@pytest.mark.parametrize(
    ("text", "metric", "kind", "limit", "unit"),
    [
        ("rss: 50 MB/h", "rss", "rate", 50e6, "B/h"),
        ("rss: 1GiB/d", "rss", "rate", 2**30 / 24, "B/h"),
        ("rss:100 KiB/min", "rss", "rate", 100 * 1024 * 60, "B/h"),
        ("detached_nodes: 100 /h", "detached_nodes", "rate", 100.0, "/h"),
        ("detached_nodes: 1/s", "detached_nodes", "rate", 3600.0, "/h"),
        ("cyclic_garbage: 0.5 /kop", "cyclic_garbage", "rate", 0.5, "/kop"),
        ("cyclic_garbage: 2 /op", "cyclic_garbage", "rate", 2000.0, "/kop"),
        ("cyclic_garbage: 0 /kop", "cyclic_garbage", "rate", 0.0, "/kop"),
        ("work_list: <= 4", "work_list", "level", 4.0, ""),
        ("work_list:<=4", "work_list", "level", 4.0, ""),
        ("rss: <= 2 GiB", "rss", "level", float(2 * 2**30), "B"),
        ("pool.used-bytes: 5 MB/h", "pool.used-bytes", "rate", 5e6, "B/h"),
    ],
)
def test_parse_budget_forms(text: str, metric: str, kind: str, limit: float, unit: str) -> None:
    budget = parse_budget(text)
    assert (budget.metric, budget.kind, budget.unit) == (metric, kind, unit)
    assert budget.limit == pytest.approx(limit)
    assert budget.text == text.strip()


def test_budget_properties_and_description() -> None:
    rate = parse_budget("rss: 50 MB/h")
    assert (rate.per, rate.is_bytes, rate.describe()) == ("h", True, "50 MB/h")
    garbage = parse_budget("cyclic_garbage: 0.5 /kop")
    assert (garbage.per, garbage.is_bytes, garbage.describe()) == ("kop", False, "0.5 /kop")
    level = parse_budget("work_list: <= 4")
    assert (level.per, level.describe()) == ("", "<= 4")


def test_metric_keyword_names_a_bare_limit() -> None:
    assert parse_budget("50 MB/h", metric="rss") == Budget("rss", "rate", 50e6, "B/h", "50 MB/h")
    # An explicit name in the text wins over the keyword.
    assert parse_budget("uss: 1 MB/h", metric="rss").metric == "uss"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("50 MB/h", "names no metric"),
        ("rss:", "has no limit"),
        ("9lives: 5 /h", "is not a metric name"),
        ("rss: 50 MB", "needs a denominator"),
        ("rss: 50 MB/week", r"unknown denominator '/week'"),
        ("rss: 50 XB/h", "unknown unit 'XB'"),
        ("rss: fast/h", "is not a number"),
        ("rss: /h", "is not a number"),
        ("rss: -5 MB/h", "negative"),
        ("nodes: -5 /h", "cannot be negative"),
        ("work_list: <= many", "a level is"),
        ("work_list: <= -1", "cannot be negative"),
        ("work_list: < 4", "needs a denominator"),
    ],
)
def test_parse_budget_refuses_with_a_sentence(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_budget(text)
