"""The measured window: it ends at ``loop_end``, and a gauge needs SUSTAIN samples."""

from __future__ import annotations

import numpy as np

from harness.analysis.shapes import Level
from harness.analysis.summary import summarize
from harness.analysis.verdict import judge_level
from harness.budgets import parse_budget
from harness.runfiles.rundata import Series
from tests.analysis.synth import HOUR, MB, budgets, pages, run_data, times

RSS = "rss: 50 MB/h"


def climb_then_trim(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """3 s of a 55 GB/h climb, then the final windows and malloc_trim: -1.3 GB."""
    rng = np.random.default_rng(seed)
    t = times(3.0, 10.0)
    v = pages(240 * MB + 55e9 / HOUR * t + rng.normal(0, 50e3, t.size))
    return np.append(t, [3.05, 3.2, 3.35]), np.append(v, v[-1] - np.array([0.2e9, 0.8e9, 1.3e9]))


def test_samples_after_loop_end_are_not_measured() -> None:
    """The reported -958 to +63 GB/h: the trim probe's drop was fitted as data."""
    for seed in range(10):
        t, v = climb_then_trim(seed)
        cut = summarize(run_data((t, v), warmup_end_s=1.0, loop_end_s=3.0), budgets(RSS))
        # Growth confirmed over the cut window, which is too short to convict (short-run).
        rule = next(b.rule for b in cut.details.budgets or ())
        assert (cut.verdict, rule) == ("suspicious", "confirmed-growth-short-run")
        assert cut.window_s is not None and cut.window_s[1] == 3.0
        low, high = cut.metrics["rss_growth"].ci or (0.0, 0.0)
        assert 50e9 < low < 55e9 < high < 60e9
        uncut = summarize(run_data((t, v), warmup_end_s=1.0), budgets(RSS))
        assert uncut.verdict != "leak"  # what happened before the cut


def test_a_crash_ends_the_window_too() -> None:
    t, v = climb_then_trim(0)
    run = run_data((t, v), warmup_end_s=1.0)
    run.events.append({"type": "event", "name": "crash", "t": 3.0})
    assert summarize(run, budgets(RSS), outcome="crashed").window_s == (1.0, 3.0)


def test_garbage_found_after_loop_end_counts_at_the_end() -> None:
    """The final garbage window holds what the workload made before it stopped."""
    t = times(20, 10.0)
    final = [{"t": 20.2, "ops": 20_000.0, "count": 5000}]
    run = run_data((t, np.full(t.size, 1e9)), garbage_windows=final, loop_end_s=t[-1])
    rate = summarize(run, budgets("cyclic_garbage: 0.5 /kop")).metrics["cyclic_garbage"]
    assert rate.value > 0.5 and rate.note == "5000 objects"


def test_a_gauge_needs_sustain_samples_before_it_is_held() -> None:
    """Early stop and time to detect look at prefixes: two samples over the
    limit were reported as "held for 3+ samples" at 0.06 s of workload."""
    budget = parse_budget("work_list: <= 4")
    early = judge_level("work_list", Level(peak=1860.0, sustained=float("nan")), budget)
    assert (early.status, early.rule) == ("suspicious", "too-few-samples")
    t = np.array([2.1, 2.6, 3.1, 3.6])
    piling = {"work_list": (t, np.array([900.0, 1800.0, 2700.0, 3600.0]))}
    rss = (times(4, 10.0), np.full(40, 1e9))
    two = summarize(run_data(rss, gauges=piling, warmup_end_s=2.0), budgets("work_list: <= 4"))
    assert two.verdict == "leak"
    assert two.time_to_detect_s is not None and two.time_to_detect_s >= 3.1
    only_two = {"work_list": (t[:2], np.array([900.0, 1800.0]))}
    run = run_data(rss, gauges=only_two, warmup_end_s=2.0)
    analysis = summarize(run, budgets("work_list: <= 4"))
    assert analysis.verdict == "suspicious"
    assert analysis.metrics["work_list_max"].note == "fewer than 3 samples"


def test_a_census_taken_during_an_allocation_window_still_counts() -> None:
    """tracemalloc pins no tensor: the pinned-storage census inside a window is judged
    (seen: the third of three samples over the limit fell in a window, and detection
    waited 2.5 s for the next census)."""
    t = times(10.0, 10.0)
    run = run_data((t, np.full(t.size, 1e9)), warmup_end_s=2.0, loop_end_s=10.0)
    census_t = np.array([3.0, 4.5, 6.0])
    run.memory["tensor_pinned"] = Series(census_t, np.full(3, 4e6), "B")
    run.events += [{"type": "event", "name": "attribution", "t": 5.5, "phase": "start",
                    "window": 1},
                   {"type": "event", "name": "attribution", "t": 6.5, "phase": "end",
                    "window": 1, "complete": True, "traced_bytes": 1000}]
    summary = summarize(run, budgets("tensor_pinned: <= 1 MB"))
    assert summary.verdict == "leak"
    # From the second reading on: a census holds a level for 2 readings, not 3.
    assert summary.time_to_detect_s is not None and 4.5 <= summary.time_to_detect_s < 6.0


def test_two_census_readings_hold_a_level_where_a_gauge_needs_three() -> None:
    """Census readings come seconds apart (their cost paces them): two over the limit
    span longer than three gauge samples do; the third came 9 to 11 s into a run."""
    t = times(10.0, 10.0)
    readings = np.array([3.0, 6.0])
    census = run_data((t, np.full(t.size, 1e9)), warmup_end_s=2.0, loop_end_s=10.0)
    census.memory["tensor_pinned"] = Series(readings, np.full(2, 4e6), "B")
    held = summarize(census, budgets("tensor_pinned: <= 1 MB"))
    assert held.verdict == "leak" and "held 4 MB for 2+ samples" in held.reasons[0]
    gauge = run_data((t, np.full(t.size, 1e9)), gauges={"pinned": (readings, np.full(2, 4e6))},
                     warmup_end_s=2.0, loop_end_s=10.0)
    assert summarize(gauge, budgets("pinned: <= 1 MB")).verdict == "suspicious"
