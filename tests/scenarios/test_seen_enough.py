"""A cache that admits nothing or decodes nothing cannot pass (RELIABILITY-3 cases 85, 92):
the workload declares what a run must see and publishes the counters that show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.api import RunContext
from harness.registry import load_scenario
from leak_harness.cli import main
from scenarios.workloads.common import ACTIVITY, expected_activity

PREFETCH_NEVER = "tests.scenarios.doubles:prefetch_never_done"
NO_BATCH_SLOTS = "tests.scenarios.doubles:no_slots_for_a_batch"


def counters_after(scenario: str, target: str | None, steps: int = 1500) -> dict[str, float]:
    """Each counter the workload declares, after ``steps`` scheduler steps in-process."""
    w = load_scenario(scenario).build(RunContext(seed=0, target=target))
    try:
        for _ in range(steps):
            w.step()
        gauges = w.gauges()
        declared = w.notes()["expects"]
        assert declared == expected_activity(w.scheduler)
        return {name: gauges[name]() for name in declared}
    finally:
        w.close()


@pytest.mark.integration
def test_a_prefetch_that_never_completes_admits_nothing() -> None:
    seen = counters_after("radix-exits", PREFETCH_NEVER)
    assert seen["admitted"] == seen["decoded"] == seen["finished"] == 0
    assert seen["exits_timeout"] > 0  # the requests waited and left: the run did not hang


@pytest.mark.integration
def test_a_batch_that_never_gets_its_slots_decodes_nothing() -> None:
    seen = counters_after("radix-overlap", NO_BATCH_SLOTS)
    assert seen["admitted"] > 0 and seen["decoded"] == seen["finished"] == 0


@pytest.mark.integration
def test_the_reference_cache_sees_everything_its_scenario_declares() -> None:
    seen = counters_after("radix-overlap", None)
    assert set(seen) == {*ACTIVITY, "exits_abort_waiting", "exits_timeout",
                         "exits_abort_running", "exits_fail_running", "exits_retract"}
    assert min(seen.values()) > 0, seen


@pytest.mark.integration
def test_a_run_that_admitted_nothing_is_error_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", "radix-exits", "--target", PREFETCH_NEVER, "--duration", "4s",
                 "--no-attribution", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "radix-exits: error" in out
    assert "it saw no requests admitted, decode steps, requests finished" in out
