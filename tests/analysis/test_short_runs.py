"""Short check runs: warm-up that levels off slowly, one-off moves, and real leaks.

The shapes are those of real 20 s runs (leak-harness check): after a 2 s
warm-up, a healthy worker's RSS still climbs by a few hundred kB as traffic
histories and caches fill, levelling off over ~20 s; the first objects window
(at 15 s) adds a 0.3-1.8 MB step; after ``loop_end`` the final windows and
the malloc_trim probe drop it by 1-9 MB. The healthy growth these runs are
judged against is given here (``HEALTHY``), as ``bench/calibrate.py`` would
measure it on such a worker: up to 4 MB over the window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.analysis.calibration import Calibration, load_calibration, short_run_warning
from harness.analysis.summary import Analysis, summarize
from harness.analysis.trend import growth
from harness.runfiles.rundata import RunData, Series
from harness.runfiles.summary import AnalysisDetails
from tests.analysis.synth import HOUR, MB, ar1, budgets, pages, run_data, settling, times

RSS = "rss: 50 MB/h"
SEEDS = range(50)
BASE = 240 * MB
# The synthetic healthy worker below: settling (2 MB) plus a step (up to 1.8 MB).
HEALTHY = Calibration({"rss": {"*": [(18.0, 4 * MB), (600.0, 4 * MB)]}})


def judge(run: RunData) -> Analysis:
    return summarize(run, budgets(RSS), calibration=HEALTHY)


def healthy(rng: np.random.Generator, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    """A fixed worker: quick rise, slow levelling, one objects-window step, wobble."""
    t = times(duration_s, 10.0)
    step = rng.uniform(0.3, 1.8) * MB * (t >= 15.0)
    wobble = ar1(rng, t.size, 0.9, 20e3)
    return t, pages(BASE + settling(t, 0.5 * MB, 1.5 * MB, 10.0) + step + wobble)


def with_trim(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two samples after the loop ended: the final windows and the trim probe."""
    end = t[-1]
    return np.append(t, [end + 0.05, end + 0.2]), np.append(v, [v[-1] - 1.5 * MB, v[-1] - 3 * MB])


def rss_rule(analysis_details: AnalysisDetails) -> str:
    return next(b.rule for b in analysis_details.budgets or () if b.text == RSS)


def test_healthy_20s_runs_pass_and_say_why() -> None:
    """The false positives of problem 1 (75-125 MB/h "leaks" on 15-20 s runs)."""
    rules = set()
    for seed in SEEDS:
        t, v = with_trim(*healthy(np.random.default_rng(seed), 20.0))
        analysis = judge(run_data((t, v), warmup_end_s=2.0, loop_end_s=20.0))
        assert analysis.verdict == "pass", analysis.reasons
        rules.add(rss_rule(analysis.details))
    assert rules == {"within-budget"}
    t, v = with_trim(*healthy(np.random.default_rng(3), 20.0))
    reasons = judge(run_data((t, v), warmup_end_s=2.0, loop_end_s=20.0)).reasons
    assert any(r.startswith("rss") and "'rss: 50 MB/h'" in r and "by itself" in r for r in reasons)


@pytest.mark.parametrize("per_h", [3.7e9, 12e9, 55e9])
def test_leaks_of_the_incidents_size_are_caught_in_20s(per_h: float) -> None:
    """3.7 GB/h (incident 1), 12 GB/h (incident 3), 55 GB/h (the injected pile-up)."""
    for seed in range(20):
        t, v = healthy(np.random.default_rng(seed), 20.0)
        t, v = with_trim(t, pages(v + per_h / HOUR * t))
        analysis = judge(run_data((t, v), warmup_end_s=2.0, loop_end_s=20.0))
        assert analysis.verdict == "leak", analysis.reasons
        low, high = analysis.metrics["rss_growth"].ci or (0.0, 0.0)
        assert low <= per_h * 1.15 and high >= per_h * 0.85


def test_noise_and_one_off_steps_never_give_a_short_leak() -> None:
    """Wandering level plus a random step of up to 3.8 MB (the largest move
    seen in a fixed run after warm-up): never a leak on a 20 s window."""
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        t = times(20, 10.0)
        step = rng.uniform(0, 3.8) * MB * (t >= rng.uniform(3, 19))
        v = pages(BASE + ar1(rng, t.size, 0.98, 200e3) + step)
        analysis = judge(run_data((t, v), warmup_end_s=2.0))
        assert analysis.verdict != "leak", analysis.reasons


def test_quick_rise_then_slow_levelling_is_cut_as_warmup_on_longer_runs() -> None:
    """Where the window can resolve the budget (10 min: 4 MB is 24 MB/h), the
    levelling is cut or judged as a plateau, and the judged rate is the flat one."""
    for seed in range(10):
        rng = np.random.default_rng(seed)
        t = times(600, 10.0)
        v = pages(BASE + settling(t, 0.5 * MB, 20 * MB, 40.0) + ar1(rng, t.size, 0.9, 20e3))
        trend = growth(t, v, warmup_s=2.0)
        assert trend is not None and trend.start_s > 60.0
        assert abs(trend.judged.per_h) < 10 * MB
        analysis = judge(run_data((t, v), warmup_end_s=2.0))
        assert analysis.verdict == "pass"
        assert rss_rule(analysis.details) == "within-budget"


def test_a_leak_under_the_levelling_is_still_found_on_longer_runs() -> None:
    for seed in range(10):
        rng = np.random.default_rng(seed)
        t = times(600, 10.0)
        rise = settling(t, 0.5 * MB, 20 * MB, 40.0)
        v = pages(BASE + rise + 200 * MB / HOUR * t + ar1(rng, t.size, 0.9, 20e3))
        analysis = judge(run_data((t, v), warmup_end_s=2.0))
        assert analysis.verdict == "leak", analysis.reasons
        assert analysis.metrics["rss_growth"].value == pytest.approx(200 * MB, rel=0.15)


def test_three_second_run_is_still_judged() -> None:
    """A 2 s warm-up leaves 10 samples of a 3 s run; the automatic cut used to
    take half of them and leave RSS unjudged ("too few samples")."""
    rng = np.random.default_rng(4)
    t = times(3.0, 10.0)
    v = pages(BASE + 55e9 / HOUR * t + rng.normal(0, 50e3, t.size))
    trend = growth(t, v, warmup_s=2.0)
    assert trend is not None and trend.n >= 8
    analysis = judge(run_data(with_trim(t, v), warmup_end_s=2.0, loop_end_s=3.0))
    assert analysis.verdict == "leak"


# -- Rule short-run: growth over a window shorter than the calibration's never convicts --

SHIPPED = load_calibration()


def heap_run(duration_s: float, per_h: float, seed: int = 0) -> RunData:
    """A heap that grows ``per_h`` from the start, with wobble, after a 2 s warm-up."""
    rng = np.random.default_rng(seed)
    t = times(duration_s, 20.0)
    heap = 80 * MB + per_h / HOUR * t + ar1(rng, t.size, 0.5, 2e3)
    run = run_data((t, np.full(t.size, BASE)), warmup_end_s=2.0, loop_end_s=duration_s)
    run.memory["heap"] = Series(t, heap, "B")
    run.header["config"] = {"scenario": "radix-steady"}
    return run


def test_the_shipped_calibration_says_how_long_its_shortest_runs_measured() -> None:
    # make calibrate's 20 s runs less their 2 s warm-up; "as long" is COMPARABLE of that.
    assert SHIPPED.shortest_window_s == 18.0
    assert SHIPPED.judged_from_s == pytest.approx(0.7 * 18.0)
    heap_windows = [w for w, _ in SHIPPED.points("heap", "radix-steady")]
    assert min(heap_windows) >= SHIPPED.judged_from_s  # no heap point was measured shorter


def test_heap_growth_of_a_5s_run_is_suspicious_and_says_how_long_a_run_must_be() -> None:
    """RELIABILITY-3 case 119: 66-135 MB/h of heap over 3.5 s, a leak in 6 runs of 12."""
    analysis = summarize(heap_run(5.5, 100 * MB), budgets("heap: 10 MB/h"), calibration=SHIPPED)
    assert analysis.verdict == "suspicious", analysis.reasons
    rule = next(b.rule for b in analysis.details.budgets or ())
    assert rule == "confirmed-growth-short-run"
    assert "a run of at least 15s (--duration 15s) judges it" in analysis.reasons[0]
    assert any(r.startswith("short run: the run measured 3.45s after its warm-up") and
               "growth of heap can make it suspicious, never a leak" in r
               for r in analysis.reasons)


def test_the_same_growth_over_the_calibrated_length_is_a_leak_found_after_it() -> None:
    analysis = summarize(heap_run(20.0, 100 * MB), budgets("heap: 10 MB/h"),
                         calibration=SHIPPED)
    assert analysis.verdict == "leak", analysis.reasons
    assert not any(r.startswith("short run") for r in analysis.reasons)
    # Time to detect replays the rule on prefixes: none shorter than the calibrated window.
    assert analysis.time_to_detect_s is not None
    assert analysis.time_to_detect_s >= 2.0 + SHIPPED.judged_from_s


def test_a_short_run_is_still_convicted_by_a_level() -> None:
    run = heap_run(5.0, 0.0)
    t = run.rss.t
    run.gauges["idle_pool_mismatch"] = Series(t, np.where(t > 2.5, 3.0, 0.0))
    analysis = summarize(run, budgets("heap: 10 MB/h", "idle_pool_mismatch: <= 0"),
                         calibration=SHIPPED)
    assert analysis.verdict == "leak", analysis.reasons


def test_a_calibration_that_does_not_say_its_run_length_judges_any_window() -> None:
    unknown = Calibration(SHIPPED.signals, "old file")
    analysis = summarize(heap_run(5.5, 100 * MB), budgets("heap: 10 MB/h"), calibration=unknown)
    assert analysis.verdict == "leak"


def test_a_short_duration_gets_a_warning_line_before_it_runs() -> None:
    assert short_run_warning(20.0, 2.0) is None and short_run_warning(None, 2.0) is None
    warning = short_run_warning(5.0, 2.0, "duration=")
    assert warning is not None and warning.startswith(
        "warning: duration= 5s measures 3s after its 2s warm-up, under the 12.6s")
    assert warning.endswith("run at least 15s to judge growth.")


def test_check_warns_once_when_its_cells_run_too_short_for_growth_to_convict() -> None:
    from harness.parent.matrix import CheckOptions, plan
    from harness.registry import load_scenario
    from leak_harness.cli.check import short_cells_warning

    cells = plan([load_scenario("radix-steady"), load_scenario("mamba-lru")])
    assert short_cells_warning(cells, CheckOptions(out=Path("x"))) is None  # 20 s each
    warning = short_cells_warning(cells, CheckOptions(out=Path("x"), duration_s=6.0))
    assert warning is not None and warning.startswith("warning: --duration 6s measures 4s")
    assert warning.endswith("(3 of 3 cells)")
