"""One RunConfig builder: the same budget override gives the same budgets from every face."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from harness.budgets import Budget
from harness.configure import merge_budgets, scenario_config
from harness.errors import UsageError
from harness.parent.matrix import CheckOptions, plan, run_matrix
from harness.runfiles.summary import load_summary
from leak_harness.cli import main
from leak_harness.pytest_plugin import LeakRunner
from tests.harness.conftest import spec
from tests.harness.fixtures.scenarios import BUDGETED

DECLARED = ("rss: 50 MB/h", "rss: <= 2 GiB", "cyclic_garbage: 0.5 /kop", "kept: <= 4")


def texts(budgets: Sequence[Budget]) -> tuple[str, ...]:
    return tuple(b.text for b in budgets)


def test_an_override_replaces_the_same_metric_and_form_and_keeps_the_rest() -> None:
    merged = texts(merge_budgets(DECLARED, ["rss: 1 GB/h"]))
    assert merged == ("rss: 1 GB/h", "rss: <= 2 GiB", "cyclic_garbage: 0.5 /kop", "kept: <= 4")


def test_off_drops_every_declared_budget_on_that_metric() -> None:
    kept = texts(merge_budgets(DECLARED, ["rss: off"]))
    assert kept == ("cyclic_garbage: 0.5 /kop", "kept: <= 4")
    assert texts(merge_budgets(DECLARED, {"cyclic_garbage": None, "kept": "<= 9"})) == (
        "rss: 50 MB/h", "rss: <= 2 GiB", "kept: <= 9",
    )


def test_a_bad_override_names_where_it_came_from() -> None:
    with pytest.raises(UsageError, match=r"^--budget: budget 'rss 50' names no metric"):
        merge_budgets(DECLARED, ["rss 50"], "--budget")
    with pytest.raises(UsageError, match="list of strings"):
        merge_budgets(DECLARED, "rss: 1 GB/h")


def test_defaults_come_from_the_scenario(tmp_path: Path) -> None:
    config = scenario_config(BUDGETED, tmp_path, spec=spec("BUDGETED"))
    assert config.duration_s == 60.0 and config.warmup_s == 0.5
    assert config.budget_texts == BUDGETED.budgets and config.scenario == spec("BUDGETED")
    assert scenario_config(BUDGETED, tmp_path, max_ops=10).duration_s is None


@pytest.mark.parametrize(("duration_s", "heap"), [
    (20.0, "heap: 10 MB/h"), (599.0, "heap: 10 MB/h"), (600.0, "heap: 1 MB/h"),
    (1800.0, "heap: 1 MB/h"), (None, "heap: 10 MB/h"),  # None: bounded by ops alone
])
def test_long_runs_are_held_to_the_long_budgets_in_place_of_the_same_metric(
    tmp_path: Path, duration_s: float | None, heap: str,
) -> None:
    scenario = replace(BUDGETED, budgets=("heap: 10 MB/h", "rss: 50 MB/h"),
                       long_budgets=("heap: 1 MB/h",))
    config = scenario_config(scenario, tmp_path, duration_s=duration_s,
                             max_ops=None if duration_s else 1000)
    assert texts(config.budgets) == (heap, "rss: 50 MB/h")


def test_an_override_still_wins_over_a_long_budget(tmp_path: Path) -> None:
    scenario = replace(BUDGETED, budgets=("heap: 10 MB/h",), long_budgets=("heap: 1 MB/h",))
    config = scenario_config(scenario, tmp_path, duration_s=1800.0, budgets=["heap: 5 MB/h"])
    assert texts(config.budgets) == ("heap: 5 MB/h",)


def test_the_measured_caches_hold_the_heap_to_1_mb_per_hour_from_10_minutes(
    tmp_path: Path,
) -> None:
    from harness.registry import load_scenario

    for name in ("radix-steady", "mamba-lru", "swa-lru", "unified-lru", "hiradix-multiturn"):
        long = scenario_config(load_scenario(name), tmp_path, duration_s=1800.0)
        short = scenario_config(load_scenario(name), tmp_path, duration_s=20.0)
        assert "heap: 1 MB/h" in texts(long.budgets) and "heap: 10 MB/h" in texts(short.budgets)


def test_only_declared_budgets_on_a_users_target_may_be_skipped(tmp_path: Path) -> None:
    own = scenario_config(BUDGETED, tmp_path, target="mine:make", budgets=["kept: <= 9"])
    skippable = {b.text for b in own.skippable_budgets}
    assert "kept: <= 9" in own.budget_texts and "kept: <= 9" not in skippable
    assert skippable == set(BUDGETED.budgets) - {"kept: <= 100"}
    # The reference cache publishes every gauge its scenarios budget: nothing to skip.
    assert scenario_config(BUDGETED, tmp_path).skippable_budgets == ()


def test_every_scenario_that_takes_an_exit_path_judges_stale_table_entries(
    tmp_path: Path,
) -> None:
    """RELIABILITY-3 case 89: radix-exits did not budget stale_request_entries, so a
    table keeping every request was at most suspicious. Every exit load budgets it,
    judged whenever the cache publishes it (request_tables()), skipped when not."""
    from harness.analysis.summary import summarize
    from harness.registry import load_scenario, scenario_names
    from tests.analysis.synth import run_data, times

    stale = "stale_request_entries: <= 0"
    for name in scenario_names():
        scenario = load_scenario(name)
        exits = name.endswith("-exits") or name in ("radix-overlap", "pd-prefill", "pd-decode")
        assert (stale in scenario.budgets) == exits, name
        config = scenario_config(scenario, tmp_path, duration_s=20.0)
        skippable = texts(config.skippable_budgets)
        assert skippable == ((stale,) if exits else ()), name  # the reference caches: only it
    config = scenario_config(load_scenario("radix-exits"), tmp_path, duration_s=20.0)
    judged_here = [b for b in config.budgets if b.metric in ("rss", "stale_request_entries")]
    t = times(20.0, 10.0)
    plain = run_data((t, t * 0 + 2e8), warmup_end_s=2.0, loop_end_s=20.0)
    without = summarize(plain, judged_here, config.warmup_s,
                        skippable=config.skippable_budgets)
    assert "stale_request_entries: skipped: this cache publishes no 'stale_request_entries' " \
           "(budget 'stale_request_entries: <= 0')." in without.reasons
    kept = run_data((t, t * 0 + 2e8), gauges={"stale_request_entries": (t, t * 100)},
                    warmup_end_s=2.0, loop_end_s=20.0)
    judged = summarize(kept, judged_here, config.warmup_s,
                       skippable=config.skippable_budgets)
    assert judged.verdict == "leak" and judged.reasons[0].startswith(
        "stale_request_entries held")


@pytest.mark.integration
def test_cli_check_and_pytest_judge_the_same_budgets(
    no_leftovers: Path, request: pytest.FixtureRequest
) -> None:
    overrides = ["rss: 3 GB/h", "cyclic_garbage: off"]
    expected = ["rss: 3 GB/h", "rss: <= 4 GiB", "kept: <= 100"]

    cli_dir = no_leftovers / "cli"
    argv = ["run", spec("BUDGETED"), "--duration", "3s", "--out", str(cli_dir)]
    assert main([*argv, *(f"--budget={b}" for b in overrides)]) == 0

    options = CheckOptions(out=no_leftovers / "check", budgets=tuple(overrides))
    # check names a scenario as the registry does; a spec stands in for the name here.
    (cell,) = run_matrix(plan([replace(BUDGETED, name=spec("BUDGETED"))]), options)

    runner = LeakRunner(request.node, no_leftovers / "pytest", "3s")
    outcome = runner(spec("BUDGETED"), budgets=overrides)

    for rundir in (cli_dir, cell.outcome.rundir, outcome.rundir):
        summary = load_summary(rundir)
        assert summary.verdict == "pass", summary.reasons
        assert list(summary.run.budgets or ()) == expected
        assert [b.text for b in summary.judged_budgets()] == expected
