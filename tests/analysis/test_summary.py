"""summarize(): verdicts, metrics, reasons and time to detect on synthetic runs."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from harness.analysis.calibration import Calibration
from harness.analysis.summary import summarize
from harness.runfiles.rundata import RunData, Series
from tests.analysis.synth import (
    HOUR,
    MB,
    ar1,
    budgets,
    gc_lines,
    linear,
    run_data,
    sawtooth,
    times,
)


def leaking_run(per_h: float = 500 * MB, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = times(HOUR, 1.0)
    return t, linear(t, per_h) + ar1(rng, t.size, 0.9, 5 * MB)


def test_rss_leak_is_confirmed_with_metrics_and_time_to_detect() -> None:
    analysis = summarize(run_data(leaking_run()), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "leak"
    growth = analysis.metrics["rss_growth"]
    assert growth.unit == "B/h" and growth.value == pytest.approx(500 * MB, rel=0.15)
    assert growth.ci is not None and growth.ci[0] > 50 * MB
    assert (growth.budget, growth.status) == ("rss: 50 MB/h", "leak")
    assert analysis.metrics["ops_per_s"].value == pytest.approx(1000.0)
    assert analysis.metrics["rss_max"].unit == "B"
    assert analysis.reasons[0].startswith("rss growth 5")
    assert analysis.time_to_detect_s is not None and 0 < analysis.time_to_detect_s < HOUR / 2
    json.dumps(analysis.to_json(), allow_nan=False)  # summary.json must be strict JSON


@pytest.mark.parametrize("phi", [0.0, 0.95])
def test_pure_noise_never_gives_a_leak(phi: float) -> None:
    for seed in range(50):
        rng = np.random.default_rng(seed)
        t = times(HOUR, 1.0)
        rss = 2e9 + ar1(rng, t.size, phi, 5 * MB)
        analysis = summarize(run_data((t, rss)), budgets("rss: 10 MB/h"))
        assert analysis.verdict in ("pass", "suspicious"), analysis.reasons


def test_time_to_detect_on_a_series_that_starts_leaking() -> None:
    rng = np.random.default_rng(5)
    t = times(2 * HOUR, 1.0)
    rss = linear(np.maximum(t - HOUR, 0.0), 1000 * MB) + rng.normal(0, 3 * MB, t.size)
    analysis = summarize(run_data((t, rss)), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "leak"
    assert analysis.time_to_detect_s is not None
    assert HOUR < analysis.time_to_detect_s < 1.6 * HOUR  # grid: 1h31m, 31 min after onset


def test_flat_run_passes_and_has_no_time_to_detect() -> None:
    rng = np.random.default_rng(6)
    t = times(HOUR, 1.0)
    analysis = summarize(run_data((t, 2e9 + rng.normal(0, MB, t.size))), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "pass"
    assert analysis.time_to_detect_s is None
    assert analysis.metrics["rss_growth"].status == "pass"


def test_sawtooth_is_judged_on_its_floor() -> None:
    rng = np.random.default_rng(7)
    t = times(HOUR, 1.0)
    rss = 1e9 + sawtooth(t, 300.0, 400 * MB) + rng.normal(0, 2 * MB, t.size)
    analysis = summarize(run_data((t, rss)), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "pass"
    assert analysis.metrics["rss_floor_growth"].status == "pass"
    assert analysis.metrics["rss_reclaimable"].value == pytest.approx(200 * MB, rel=0.15)
    assert analysis.metrics["rss_growth"].status is None  # reported, not judged
    assert any("sawtooth" in reason for reason in analysis.reasons)


def test_cyclic_garbage_budget() -> None:
    t = times(600, 1.0)
    flat = (t, np.full(t.size, 1e9))
    broken = run_data(flat, gc_events=gc_lines(600, per_op=2.0, ops_per_s=1000.0))
    analysis = summarize(broken, budgets("cyclic_garbage: 0.5 /kop"))
    assert analysis.verdict == "leak"
    assert analysis.metrics["cyclic_garbage"].value == pytest.approx(2000.0, rel=0.02)
    assert analysis.metrics["gen2_collections"].value == pytest.approx(1.0, rel=0.02)
    fixed = run_data(flat, gc_events=gc_lines(600, per_op=0.0, ops_per_s=1000.0))
    assert summarize(fixed, budgets("cyclic_garbage: 0.5 /kop")).verdict == "pass"


def test_gauge_budgets_level_and_growth() -> None:
    t = times(600, 1.0)
    rss = (t, np.full(t.size, 1e9))
    piling = {"work_list": (t, 2.0 * t), "detached_nodes": (t, 1.0 * t)}  # +3600 /h
    analysis = summarize(
        run_data(rss, gauges=piling), budgets("work_list: <= 4", "detached_nodes: 100 /h")
    )
    assert analysis.verdict == "leak"
    assert analysis.metrics["work_list_max"].status == "leak"
    assert analysis.metrics["detached_nodes_growth"].value == pytest.approx(3600.0, rel=0.01)
    assert analysis.metrics["detached_nodes_growth"].unit == "/h"
    drained = np.where(np.arange(t.size) % 2 == 0, 2.0, 0.0)
    drained[300] = 9.0  # one sample caught mid-round
    spiky = summarize(run_data(rss, gauges={"work_list": (t, drained)}), budgets("work_list: <= 4"))
    assert spiky.verdict == "suspicious"
    assert spiky.metrics["work_list_max"].value == 9.0


def test_unknown_or_mismatched_budgets_are_refused() -> None:
    run = run_data(leaking_run(), gauges={"work_list": (np.arange(5.0), np.zeros(5))})
    with pytest.raises(ValueError, match=r"unknown metric 'wrok_list'; known: .*work_list"):
        summarize(run, budgets("wrok_list: <= 4"))
    with pytest.raises(ValueError, match="in bytes"):
        summarize(run, budgets("rss: 100 /h"))
    with pytest.raises(ValueError, match="per work"):
        summarize(run, budgets("cyclic_garbage: 5 /h"))
    with pytest.raises(ValueError, match="per hour"):
        summarize(run, budgets("work_list: 5 /kop"))
    with pytest.raises(ValueError, match="names no metric"):
        budgets("50 MB/h")  # refused where it is typed, before any analysis


def test_process_outcome_overrides_and_missing_data_is_reported() -> None:
    t = times(30, 1.0)
    run = run_data((t, linear(t, 100 * MB)))
    analysis = summarize(run, budgets("rss: 50 MB/h", "work_list: <= 4"), outcome="crashed",
                         outcome_reason="AssertionError: parent does not have child key")
    assert analysis.verdict == "crashed"
    assert analysis.reasons[0].startswith("AssertionError")
    assert any("work_list" in reason for reason in analysis.reasons)


def test_a_crash_with_little_data_says_what_it_could_not_judge_in_one_line() -> None:
    t = times(30, 1.0)
    run = run_data((t, linear(t, 100 * MB)))
    analysis = summarize(run, budgets("rss: 50 MB/h", "work_list: <= 4", "ring: <= 9",
                                      "slots: <= 0"), outcome="crashed",
                         outcome_reason="PoolError: double free")
    assert analysis.reasons[0] == "PoolError: double free"
    assert ("too little data before it ended to judge work_list, ring, slots."
            in analysis.reasons)
    assert not any(r.startswith("work_list:") for r in analysis.reasons)
    assert any(r.startswith("rss growth") for r in analysis.reasons)  # what it could judge


def test_a_budget_without_data_is_an_error_not_a_pass() -> None:
    t = times(5, 1.0)
    analysis = summarize(run_data((t, np.full(t.size, 1e9))), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "error"
    assert "too few samples" in analysis.reasons[0]


def test_warmup_from_argument_or_event() -> None:
    t, rss = leaking_run()
    by_event = summarize(run_data((t, rss), warmup_end_s=120.0), budgets())
    assert by_event.window_s is not None and by_event.window_s[0] == 120.0
    by_argument = summarize(run_data((t, rss), warmup_end_s=120.0), budgets(), warmup_s=600.0)
    assert by_argument.window_s is not None and by_argument.window_s[0] == 600.0
    assert (by_argument.details.series or {})["rss"].start_s >= 600.0


def test_details_hold_garbage_types_objects_and_cycles() -> None:
    t = times(600, 1.0)
    cycle = {"type": "TreeNode", "path": ["TreeNode.mamba_prev", "TreeNode.parent"],
             "length": 2, "retained_bytes": 512}
    windows = [
        {"t": 30.0 * k, "ops": 30_000.0 * k, "count": 20, "by_type": {"TreeNode": 10, "dict": 10},
         "bytes_by_type": {"TreeNode": 560, "dict": 2320}, "cycles": [cycle]}
        for k in range(1, 4)
    ]
    objects = [{"t": 0.0, "ops": 0, "counts": {"TreeNode": 5}},
               {"t": 600.0, "ops": 600_000, "counts": {"TreeNode": 905}}]
    run = run_data((t, np.full(t.size, 1e9)), garbage_windows=windows, object_windows=objects)
    details: Any = summarize(run, budgets()).to_json()["details"]
    assert details["garbage_by_type"][0]["type"] == "TreeNode"
    assert details["object_growth"][0] == {
        "type": "TreeNode", "first": 5, "last": 905, "delta": 900, "per_h": 5400.0,
        "per_kop": 1.5,
    }
    assert details["cycles"] == [{"shape": ["TreeNode.mamba_prev", "TreeNode.parent"],
                                  "count": 3, "retained_bytes": 1536, "types": ["TreeNode"]}]


def test_an_empty_run_is_summarised_without_crashing() -> None:
    analysis = summarize(run_data(), budgets())
    assert (analysis.verdict, analysis.metrics, analysis.window_s) == ("pass", {}, None)
    crashed = summarize(run_data(), budgets("rss: 50 MB/h"), outcome="crashed")
    assert crashed.verdict == "crashed"
    assert "rss: the run recorded no samples of it." in crashed.reasons


def filling_cache_run(fills_for_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RSS climbing 500 MB/h for an hour while cached tokens rise for ``fills_for_s``."""
    t, rss = leaking_run()
    cached = 4000.0 + 100.0 * np.minimum(t, fills_for_s)
    return t, rss, cached


def test_growth_while_the_cache_still_fills_is_suspicious_and_says_why() -> None:
    t, rss, cached = filling_cache_run(fills_for_s=HOUR)
    analysis = summarize(run_data((t, rss), gauges={"cached_tokens": (t, cached)}),
                         budgets("rss: 50 MB/h"))
    assert analysis.verdict == "suspicious"
    assert "but the cache is still filling: cached tokens reached" in analysis.reasons[0]
    assert "run until cached_tokens levels off" in analysis.reasons[0]


def test_growth_after_the_cache_is_full_is_a_leak() -> None:
    t, rss, cached = filling_cache_run(fills_for_s=HOUR / 4)  # full well before the last third
    analysis = summarize(run_data((t, rss), gauges={"cached_tokens": (t, cached)}),
                         budgets("rss: 50 MB/h"))
    assert analysis.verdict == "leak", analysis.reasons


def tree_run(nodes_after_fill_per_s: float, leak_per_h: float, seed: int = 3
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """60 s: a tree fills to 20,000 nodes in 20 s, then gains ``nodes_after_fill_per_s``;
    each node costs 2 KB of RSS, and ``leak_per_h`` comes on top."""
    rng = np.random.default_rng(seed)
    t = times(60.0, 5.0)
    nodes = 1000.0 * np.minimum(t, 20.0) + nodes_after_fill_per_s * np.maximum(t - 20.0, 0.0)
    nodes += np.round(rng.normal(0.0, 20.0, t.size))  # a full tree wanders around its size
    rss = 1e9 + 2000.0 * nodes + linear(t, leak_per_h, 0.0) + rng.normal(0, 20e3, t.size)
    return t, rss, nodes


def test_growth_the_trees_own_growth_accounts_for_is_suspicious_and_says_why() -> None:
    # Full of tokens, the zoo's filling cache still split into more nodes for a minute:
    # its heap grew with them, +280 MB/h on the last third of a 60 s run.
    t, rss, nodes = tree_run(nodes_after_fill_per_s=500.0, leak_per_h=0.0)
    analysis = summarize(run_data((t, rss), gauges={"tree_nodes": (t, nodes)}),
                         budgets("rss: 50 MB/h"))
    assert analysis.verdict == "suspicious", analysis.reasons
    assert "but the cache's tree still grows: tree_nodes rose" in analysis.reasons[0]
    assert "run until tree_nodes levels off" in analysis.reasons[0]
    judged_alone = summarize(run_data((t, rss)), budgets("rss: 50 MB/h"))
    assert judged_alone.verdict == "leak"  # the same growth, with no tree to account for it


@pytest.mark.parametrize(("nodes_per_s", "leak_per_h"), [(0.0, 4000 * MB), (500.0, 20000 * MB)])
def test_a_leak_beyond_what_the_tree_accounts_for_stays_a_leak(nodes_per_s: float,
                                                                leak_per_h: float) -> None:
    t, rss, nodes = tree_run(nodes_after_fill_per_s=nodes_per_s, leak_per_h=leak_per_h)
    analysis = summarize(run_data((t, rss), gauges={"tree_nodes": (t, nodes)}),
                         budgets("rss: 50 MB/h"))
    assert analysis.verdict == "leak", analysis.reasons


@pytest.mark.parametrize(("seconds", "verdict"), [(18.0, "suspicious"), (60.0, "leak")])
def test_a_floor_under_few_drops_cannot_confirm_a_leak(seconds: float, verdict: str) -> None:
    """Three or four drop bottoms lie on a line as easily under a fill as under a leak."""
    rng = np.random.default_rng(8)
    t = times(seconds, 10.0)
    rss = linear(t, 5000 * MB) + sawtooth(t, 4.0, 16 * MB) + rng.normal(0, 0.05 * MB, t.size)
    analysis = summarize(run_data((t, rss)), budgets("rss: 50 MB/h"))
    floor = analysis.metrics["rss_floor_growth"]
    assert floor.ci is not None and floor.ci[0] > 4000 * MB  # the line itself is clear
    assert analysis.verdict == verdict
    if verdict == "suspicious":
        assert any("cannot tell a fill from a leak" in r for r in analysis.reasons)


def rss_alone_run(rss_per_h: float, heap_per_h: float, seconds: float = 20.0) -> RunData:
    """RSS growing ``rss_per_h`` beside a heap growing ``heap_per_h`` and flat blocks."""
    rng = np.random.default_rng(4)
    t = times(seconds, 10.0)
    run = run_data((t, linear(t, rss_per_h, 300 * MB) + rng.normal(0, 30e3, t.size)))
    run.memory["heap"] = Series(t, linear(t, heap_per_h, 90 * MB) + rng.normal(0, 5e3, t.size),
                                "B")
    run.memory["py_blocks"] = Series(t, 600e3 + rng.normal(0, 200, t.size), "")
    return run


NONE = Calibration({})  # judged as they are: no healthy growth taken off
RSS_HEAP = budgets("rss: 50 MB/h", "heap: 10 MB/h", "py_blocks: 250000 /h")


def test_a_few_megabytes_of_rss_no_allocator_shows_are_suspicious_not_a_leak() -> None:
    # check -j 2 on a busy machine: a healthy cell's RSS rose 3 MB in 18 s (611 MB/h)
    # while the heap, Python's blocks and shared memory stayed flat.
    analysis = summarize(rss_alone_run(600 * MB, 0.0), RSS_HEAP, calibration=NONE)
    assert analysis.verdict == "suspicious", analysis.reasons
    (rss,) = [r for r in analysis.reasons if r.startswith("rss")]
    assert "no allocator shows it (heap, py_blocks do not grow with it)" in rss
    assert "under 16 MB it does not confirm a leak" in rss


@pytest.mark.parametrize(("rss_per_h", "heap_per_h", "seconds"), [
    (600 * MB, 300 * MB, 20.0),  # the heap accounts for half of it
    (600 * MB, 0.0, 120.0),  # 20 MB: too much for the machine's load to explain
])
def test_rss_growth_an_allocator_shows_or_too_large_to_be_load_stays_a_leak(
    rss_per_h: float, heap_per_h: float, seconds: float
) -> None:
    analysis = summarize(rss_alone_run(rss_per_h, heap_per_h, seconds), RSS_HEAP,
                         calibration=NONE)
    assert analysis.metrics["rss_growth"].status == "leak", analysis.reasons


def test_without_an_allocator_signal_rss_judges_alone_as_before() -> None:
    t = times(20.0, 10.0)
    run = run_data((t, linear(t, 600 * MB, 300 * MB)))
    assert summarize(run, budgets("rss: 50 MB/h"), calibration=NONE).verdict == "leak"


def level_leak_then_crash(where: str, crash_t: float) -> RunData:
    """A gauge over its level from the tenth second, then a crash ``where`` at ``crash_t``."""
    t = times(30, 1.0)
    run = run_data((t, np.full(t.size, 1e9)),
                   gauges={"idle_pool_mismatch": (t, np.where(t >= 10, 6.0, 0.0))})
    run.events.append({"type": "event", "name": "crash", "t": crash_t, "where": where,
                       "error": "AssertionError: mamba pool: 27 used != 26 in tree"})
    return run


def test_a_leak_the_books_confirmed_before_the_end_of_run_check_raised_reads_leak() -> None:
    reason = "the scenario raised: AssertionError: mamba pool: 27 used != 26 in tree"
    analysis = summarize(level_leak_then_crash("close", 30.0),
                         budgets("idle_pool_mismatch: <= 0"), outcome="crashed",
                         outcome_reason=reason)
    assert analysis.verdict == "leak"
    assert analysis.reasons[0] == reason  # the exception stays, as evidence
    assert analysis.time_to_detect_s is not None and analysis.time_to_detect_s < 30


def test_code_that_raised_before_any_budget_confirmed_a_leak_stays_crashed() -> None:
    run = level_leak_then_crash("step", 30.0)
    run.gauges["idle_pool_mismatch"] = Series(run.gauges["idle_pool_mismatch"].t,
                                              np.zeros(30))
    analysis = summarize(run, budgets("idle_pool_mismatch: <= 0"), outcome="crashed",
                         outcome_reason="AssertionError: non-leaf")
    assert analysis.verdict == "crashed"
