"""bench/time_to_detect.py --generic: which budgets a cell keeps."""

from __future__ import annotations

from bench.time_to_detect import generic_only
from harness.budgets import parse_budget
from harness.configure import merge_budgets
from harness.parent.matrix import plan
from harness.registry import load_scenario
from scenarios.workloads.common import GENERIC_BUDGETS


def test_generic_only_keeps_the_generic_budgets_and_turns_the_gauges_off() -> None:
    cell = next(c for c in plan([load_scenario("hiradix-pp-sync")]) if c.inject is not None)
    kept = merge_budgets(cell.scenario.budgets, generic_only(cell))
    metrics = {budget.metric for budget in kept}
    assert metrics == {parse_budget(text).metric for text in GENERIC_BUDGETS}
    assert "work_list: off" in generic_only(cell)
