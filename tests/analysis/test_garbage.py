"""Cyclic garbage per kop, collections per minute, garbage and live objects by type."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.analysis.garbage import (
    block_rate,
    collections_per_min,
    cyclic_garbage,
    garbage_by_type,
    object_growth,
    pause_per_min,
    type_series,
)
from harness.runfiles.rundata import Series
from tests.analysis.synth import gc_lines

OPS_PER_S = 500.0


def ops_series(duration_s: float) -> Series:
    t = np.arange(0.0, duration_s + 1.0)
    return Series(t, t * OPS_PER_S, "ops")


def test_garbage_per_kop_from_gc_lines() -> None:
    """2 objects per op (2000 /kop), freed partly by gen-0 each second, mostly by gen-2."""
    events = gc_lines(1200, per_op=2.0, ops_per_s=OPS_PER_S, gen2_every_s=60)
    rate = cyclic_garbage(events, [], ops_series(1200), 0.0, 1200.0)
    assert rate is not None
    assert rate.per_kop == pytest.approx(2000.0, rel=0.01)
    assert rate.ci is not None and rate.ci[0] <= 2000.0 <= rate.ci[1]
    assert rate.ops == pytest.approx(1200 * OPS_PER_S)


def test_clean_cache_makes_no_garbage() -> None:
    events = gc_lines(600, per_op=0.0, ops_per_s=OPS_PER_S)
    rate = cyclic_garbage(events, [], ops_series(600), 0.0, 600.0)
    assert rate is not None and rate.per_kop == 0.0 and rate.ci == (0.0, 0.0)


def test_garbage_windows_add_what_forced_collections_found() -> None:
    events = gc_lines(600, per_op=0.001, ops_per_s=OPS_PER_S)  # 1 /kop seen by the gc sampler
    windows = [{"t": float(t), "ops": t * OPS_PER_S, "count": 3000} for t in (150, 300, 450, 600)]
    rate = cyclic_garbage(events, windows, ops_series(600), 0.0, 600.0)
    assert rate is not None
    assert rate.per_kop == pytest.approx(1.0 + 4 * 3000 / (600 * OPS_PER_S) * 1000, rel=0.01)


def test_rate_window_excludes_warmup_and_needs_work() -> None:
    times = np.array([10.0, 100.0, 200.0])
    amounts = np.array([1e6, 50.0, 50.0])  # the build's leftovers at t=10
    rate = block_rate(times, amounts, ops_series(300), start_s=60.0, end_s=300.0)
    assert rate is not None and rate.objects == 100.0
    idle = Series(np.array([0.0, 300.0]), np.array([5.0, 5.0]), "ops")
    assert block_rate(times, amounts, idle, 0.0, 300.0) is None
    assert block_rate(times, amounts, ops_series(300), 100.0, 100.0) is None


def test_lumpy_garbage_gets_a_wide_interval() -> None:
    """One gen-2 in the whole window: the estimate stands, the interval says how little we know."""
    events: list[dict[str, Any]] = [{"t": 500.0, "gen": 2, "collected": 60_000}]
    rate = block_rate(
        np.array([500.0]), np.array([60_000.0]), ops_series(600), start_s=0.0, end_s=600.0
    )
    assert rate is not None and rate.ci is not None
    assert rate.ci[0] == 0.0 and rate.ci[1] > 2 * rate.per_kop
    assert collections_per_min(events, 2, 0.0, 600.0) == pytest.approx(0.1)


def test_collections_and_pauses_per_minute() -> None:
    events = gc_lines(600, per_op=1.0, ops_per_s=OPS_PER_S, gen2_every_s=30)
    assert collections_per_min(events, 2, 0.0, 600.0) == pytest.approx(2.0)
    assert collections_per_min(events, 0, 0.0, 600.0) == pytest.approx(100 * 60)
    pause = pause_per_min(events, 0.0, 600.0)
    assert pause == pytest.approx((600 * 0.1 + 20 * 0.001) / 10.0)
    assert collections_per_min(events, 2, 5.0, 5.0) is None


def garbage_windows() -> list[dict[str, Any]]:
    return [
        {"t": 30.0 * k, "ops": 30_000.0 * k, "count": 300 * k,
         "by_type": {"TreeNode": 100 * k, "dict": 100 * k, "list": 100 * k},
         "bytes_by_type": {"TreeNode": 5600 * k, "dict": 23_200 * k, "list": 8800 * k}}
        for k in range(1, 5)
    ]


def test_garbage_by_type_sums_windows_after_warmup() -> None:
    rows = garbage_by_type(garbage_windows(), start_s=31.0)
    assert [row.type for row in rows] == ["TreeNode", "dict", "list"]  # ties: by name
    assert (rows[0].objects, rows[0].bytes) == (900, 5600 * 9)
    # Windows at 60, 90, 120 s: garbage made after the first, over 60,000 ops.
    assert rows[0].per_kop == pytest.approx((300 + 400) / 60_000 * 1000)
    assert garbage_by_type([], 0.0) == []


def test_type_series_leaves_missing_types_out() -> None:
    windows = [
        {"t": 0.0, "counts": {"TreeNode": 10, "Work": 1}},
        {"t": 15.0, "counts": {"TreeNode": 20}},
        {"t": 30.0, "counts": {"TreeNode": 30, "Work": 3}},
    ]
    series = type_series(windows, "counts", ["TreeNode", "Work"])
    assert series["TreeNode"].v.tolist() == [10.0, 20.0, 30.0]
    assert series["Work"].t.tolist() == [0.0, 30.0]


def test_object_growth_ranks_types_by_growth() -> None:
    windows = [
        {"t": 0.0, "ops": 0, "counts": {"TreeNode": 1000, "Work": 2, "<other>": 9}},
        {"t": 900.0, "ops": 90_000, "counts": {"TreeNode": 1500, "Work": 2}},
        {"t": 1800.0, "ops": 180_000, "counts": {"TreeNode": 2000, "Work": 1, "str": 7}},
    ]
    rows = object_growth(windows, start_s=0.0)
    assert [row.type for row in rows] == ["TreeNode", "Work"]  # str seen once, <other> skipped
    assert (rows[0].first, rows[0].last, rows[0].delta) == (1000, 2000, 1000)
    assert rows[0].per_h == pytest.approx(2000.0)
    assert rows[0].per_kop == pytest.approx(1000 / 180)
    assert object_growth(windows, start_s=1000.0) == []


def test_young_collections_tighten_the_lower_bound() -> None:
    """Broken-LRU shape: 20% of the garbage freed by young collections every
    second, the rest by two gen-2 lumps in 15 s. Blocks alone cannot exclude 0
    (seen: 1070 /kop, 95% CI 0 to 2400); the young part alone can."""
    events = [e for e in gc_lines(17, per_op=1.0, ops_per_s=OPS_PER_S, gen2_every_s=7)
              if e["t"] > 2.0]
    lumpy = block_rate(*_arrays(events), ops_series(17), 2.0, 17.0)
    assert lumpy is not None and lumpy.ci is not None and lumpy.ci[0] < 50.0
    rate = cyclic_garbage(events, [], ops_series(17), 2.0, 17.0)
    assert rate is not None and rate.ci is not None
    assert rate.per_kop == pytest.approx(lumpy.per_kop)
    assert 150.0 < rate.ci[0] <= 200.0  # the young 20%: 200 /kop, exactly, every second
    assert rate.ci[1] >= lumpy.ci[1]  # the upper side is the blocks' (at 97.5%)


def test_young_lower_bound_is_honest_under_noise() -> None:
    """Young garbage varying from second to second (Poisson): its lower bound
    stays under the true young rate in >= 97% of runs."""
    true_young = 50.0  # /kop
    below = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        ops = rng.poisson(OPS_PER_S, 15).astype(float)
        t = np.arange(1.0, 16.0)
        collected = rng.poisson(true_young / 1000.0 * ops)
        events = [{"t": float(s), "gen": 0, "count": 10, "collected": float(c)}
                  for s, c in zip(t, collected, strict=True)]
        cumulative = Series(np.concatenate(([0.0], t)), np.concatenate(([0.0], np.cumsum(ops))))
        rate = cyclic_garbage(events, [], cumulative, 0.0, 15.0)
        assert rate is not None and rate.ci is not None
        below += rate.ci[0] <= true_young
    assert below >= 194


def test_fixed_code_stays_exactly_zero_with_young_lines() -> None:
    events = [{"t": float(s), "gen": g, "count": 5, "collected": 0} for s in range(1, 16)
              for g in (0, 1)]
    rate = cyclic_garbage(events, [], ops_series(15), 2.0, 15.0)
    assert rate is not None and (rate.per_kop, rate.ci) == (0.0, (0.0, 0.0))


def _arrays(events: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([float(e["t"]) for e in events]),
            np.array([float(e["collected"]) for e in events]))
