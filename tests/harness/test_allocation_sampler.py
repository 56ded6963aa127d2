"""Allocation windows: the leaking line is found, in-flight work nets to zero, runs are unharmed."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np

from harness.analysis.windows import attribution_windows, bridged, without
from harness.runfiles.rundata import RunData, Series
from harness.worker.samplers.allocations import AllocationSampler, snapshot, top_sites
from tests.harness.test_samplers import FakeClock, Recorder

KEPT: list[list[int]] = []


def leak_one() -> None:
    KEPT.append(list(range(50)))  # the leaking line


def churn() -> None:
    scratch = [list(range(50)) for _ in range(20)]  # in flight: freed before the next step
    del scratch


def drive(sampler: AllocationSampler, clock: FakeClock, until: float, step: Any) -> None:
    while clock.now < until:
        clock.now = round(clock.now + 0.01, 4)
        step()
        sampler.poll(clock.now, ops=int(clock.now * 100))


def test_a_window_names_the_line_that_keeps_its_allocations() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = AllocationSampler([0.5], length_s=1.0)
    sampler.start(sink, clock)
    drive(sampler, clock, 2.0, lambda: (leak_one(), churn()))
    sampler.stop()
    (line,) = sink.of("alloc")
    top = line["sites"][0]
    assert top["site"].endswith("test_allocation_sampler.py:19"), line["sites"]
    assert top["count"] >= 40 and top["bytes"] > 40 * 50 * 8
    churned = [s for s in line["sites"] if s["site"].endswith("test_allocation_sampler.py:23")]
    assert sum(s["bytes"] for s in churned) < 0.01 * top["bytes"]  # in-flight work nets to ~0
    assert not [s for s in line["sites"] if s["site"].startswith("harness/")]  # not its own
    assert line["ops"] > 0 and line["from_t"] >= 1.0
    phases = [(e["phase"], e["window"]) for e in sink.of("event")]
    assert phases == [("start", 1), ("end", 1)]
    assert sink.of("event")[-1]["traced_bytes"] > 0  # bounds what the window can leave behind
    assert not tracemalloc.is_tracing()
    KEPT.clear()


def test_a_window_cut_short_by_the_end_of_the_run_stops_tracing() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = AllocationSampler([0.5, 5.0], length_s=2.0)
    sampler.start(sink, clock)
    drive(sampler, clock, 1.0, churn)
    sampler.stop()
    assert not tracemalloc.is_tracing() and not sink.of("alloc")
    assert sink.of("event")[-1]["complete"] is False


def test_the_windows_samples_are_dropped_from_every_judged_series() -> None:
    run = RunData(header={})
    run.events = [
        {"name": "attribution", "phase": "start", "window": 1, "t": 2.0},
        {"name": "attribution", "phase": "end", "window": 1, "t": 3.0},
        {"name": "attribution", "phase": "start", "window": 2, "t": 8.0},
    ]
    windows = attribution_windows(run)
    assert windows == [(2.0, 3.0), (8.0, float("inf"))]
    t = np.arange(10, dtype=np.float64)
    kept = without(Series(t, t * 2, "B"), windows)
    assert kept.t.tolist() == [0, 1, 4, 5, 6, 7]


def test_the_level_a_window_leaves_behind_is_bridged_and_the_slope_kept() -> None:
    t = np.arange(0, 20, 0.1)
    slope = 1000.0  # per second
    v = 1e6 + slope * t + 130_000 * (t > 8.4) + 100_000 * (t > 15.5)  # two windows' residue
    windows = [(6.5, 8.4), (13.7, 15.5)]
    bridged_series = bridged(Series(t, v, "B"), windows)
    gains = np.diff(bridged_series.v) / np.diff(bridged_series.t)
    assert np.allclose(gains, slope, rtol=0.02)  # no step left, the growth kept
    flat = bridged(Series(t, np.full(t.size, 5.0), ""), windows)
    assert np.allclose(flat.v, 5.0)


def sawtooth(t: np.ndarray, height: float, period_s: float) -> np.ndarray:
    """A buffer of ``height`` held for the first half of every period."""
    return 1e8 + height * ((t % period_s) < period_s / 2)


def test_a_buffer_freed_while_a_window_ran_is_the_programs_not_a_residue() -> None:
    t = np.arange(0, 30, 0.1)
    v = sawtooth(t, 16e6, 4.0)
    windows = [(1.5, 2.5), (9.5, 10.5)]  # each spans a fall: held before, freed after
    assert np.ptp(bridged(Series(t, v, "B"), windows).v) <= 16e6 + 1  # no staircase


def test_a_rise_beyond_what_tracemalloc_held_is_kept_and_a_smaller_one_bridged() -> None:
    t = np.arange(0, 30, 0.1)
    v = sawtooth(t, 16e6, 4.0) + 100_000 * (t > 17.2)  # a residue at the second window
    windows = [(3.5, 4.5), (16.8, 17.2)]  # the first spans a rise of the buffer
    out = bridged(Series(t, v, "B"), windows, {3.5: 2e6, 16.8: 2e6})
    after = out.t > 17.5
    expected = sawtooth(out.t, 16e6, 4.0)
    assert np.allclose(out.v[after], expected[after], atol=1.0)  # residue off, buffer kept
    unbounded = bridged(Series(t, v, "B"), windows)
    assert unbounded.v[after].max() < expected[after].max() - 15e6  # what a bound prevents


def test_a_residue_under_fast_wander_is_bridged_on_seconds_of_samples_not_a_few() -> None:
    """The fixed cache's heap wanders +-30 KB within a second; five samples a side
    misjudged a residue by up to 28 KB over 20 seeds, a step that tilts a 60 s slope."""
    errors = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        t = np.arange(0, 60, 0.1)
        v = 1e8 + rng.normal(0, 15e3, t.size) + 80e3 * (t > 19.0)  # 80 KB left behind
        out = bridged(Series(t, v, "B"), [(16.5, 19.0)], {16.5: 600e3})
        errors.append(abs(np.median(out.v[out.t > 19]) - np.median(out.v[out.t < 16.5])))
    assert np.mean(errors) < 5e3 and np.max(errors) < 12e3


def test_a_residue_after_a_fill_is_measured_against_the_flat_stretch_not_the_fill() -> None:
    """A memo fills for 4.4 s, then holds; a window at 6.5 s leaves 110 KB behind, and
    the run ends 0.8 s after the second: two stretches, whose median is their mean."""
    rng = np.random.default_rng(3)
    t = np.arange(0, 20, 0.1)
    v = 1e8 + np.minimum(t, 4.4) / 4.4 * 5e6 + 110e3 * (t > 8.7) + rng.normal(0, 5e3, t.size)
    windows = [(6.5, 8.7), (13.7, 19.2)]
    out = bridged(Series(t, v, "B"), windows, {6.5: 400e3, 13.7: 400e3})
    before = np.median(out.v[(out.t > 5.0) & (out.t < 6.5)])
    after = np.median(out.v[(out.t > 8.7) & (out.t < 13.7)])
    assert abs(after - before) < 15e3


def make_table() -> bytearray:
    return bytearray(4096)  # the shared line: a table, whoever asks for it


def table_on_path_a() -> bytearray:
    return make_table()


def table_on_path_b() -> bytearray:
    return make_table()


def test_a_site_s_paths_that_shrank_are_its_freed_bytes() -> None:
    """A table re-allocated at its working size: the old one (made on path a) is freed,
    the new one (path b) is kept. The site grew 4 KB on one path and freed 4 KB on the
    other: the window records both, so the analysis can net them."""
    tracemalloc.start(8)
    try:
        table = table_on_path_a()
        baseline = snapshot()
        table = table_on_path_b()
        end = snapshot()
    finally:
        tracemalloc.stop()
    del table
    [entry] = [s for s in top_sites(end, baseline) if s["site"] == line_of(make_table)]
    assert entry["bytes"] >= 4096 and entry.get("freed", 0) >= 4096
    assert line_of(table_on_path_b) in entry["stack"]
    assert line_of(table_on_path_a) not in entry["stack"]  # the path that grew


def line_of(function: Any) -> str:
    """``file:line`` of a one-line function's body, as the sampler names frames."""
    return f"tests/harness/test_allocation_sampler.py:{function.__code__.co_firstlineno + 1}"
