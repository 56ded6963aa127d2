"""Samplers on a fake clock: what they record, and that they never become the leak."""

from __future__ import annotations

import gc
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import objgraph
import pytest

from harness.worker.samplers import rss as rss_module
from harness.worker.samplers.base import Every, forced_collection
from harness.worker.samplers.garbage import GarbageSampler, census
from harness.worker.samplers.gauges import GaugesSampler
from harness.worker.samplers.gc_events import GcEventsSampler
from harness.worker.samplers.malloc_trim import MallocTrimSampler
from harness.worker.samplers.objects import ObjectsSampler, type_counts
from harness.worker.samplers.rss import RssSampler
from tests.harness.doubles import FakeStorage, FakeTensor


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A Sink that keeps records in memory (for assertions, not for the leak test)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def line(self, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))

    def sample(self, kind: str, t: float, **fields: Any) -> None:
        self.records.append({"type": kind, "t": t, **fields})

    def event(self, name: str, t: float, **fields: Any) -> None:
        self.records.append({"type": "event", "name": name, "t": t, **fields})

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == kind]


class Node:
    def __init__(self) -> None:
        self.partner: Node | None = None


def make_cycles(n: int) -> None:
    for _ in range(n):
        a, b = Node(), Node()
        a.partner, b.partner = b, a


def test_every_fires_once_per_interval_and_reanchors() -> None:
    every = Every(1.0)
    assert [every.due(t) for t in (0.0, 0.5, 1.0, 1.2, 5.0, 5.5, 6.0)] == [
        True, False, True, False, True, False, True,
    ]


def test_gc_sampler_writes_each_gen2_and_sums_young_generations() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = GcEventsSampler(flush_interval_s=1.0)
    sampler.start(sink, clock)
    gc.disable()  # only the collections below: an automatic gen-2 would be counted too
    try:
        make_cycles(5000)
        gc.collect(0)
        gc.collect(2)
        with forced_collection():
            gc.collect()  # the harness's own: must not be recorded
        clock.now = 1.0
        sampler.poll(1.0, ops=42)
    finally:
        gc.enable()
        sampler.stop()
    lines = sink.of("gc")
    gen2 = [r for r in lines if r["gen"] == 2]
    young = [r for r in lines if r["gen"] == 0]
    assert len(gen2) == 1 and gen2[0]["count"] == 1
    assert young and young[0]["count"] >= 1 and young[0]["ops"] == 42
    assert sum(r["collected"] for r in lines) >= 10_000  # 5000 two-node cycles
    assert sampler._on_gc not in gc.callbacks


def test_garbage_window_counts_cycles_by_type_and_restores_the_collector() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = GarbageSampler(interval_s=30.0)
    flags, saved = gc.get_debug(), len(gc.garbage)
    gc.collect()
    sampler.start(sink, clock)
    make_cycles(300)
    sampler.poll(10.0, ops=1)  # not due yet
    assert not sink.of("garbage")
    sampler.poll(30.0, ops=2)
    window = sink.of("garbage")[0]
    assert window["by_type"]["Node"] == 600 and window["count"] >= 600
    assert window["bytes_by_type"]["Node"] > 0 and not window["final"]
    assert gc.get_debug() == flags and len(gc.garbage) == saved
    assert gc.collect() == 0  # the window freed what it saved


def test_census_adds_tensor_storage_once_per_storage() -> None:
    shared = FakeStorage(1, 1_000_000)
    counts, sizes = census([FakeTensor(shared), FakeTensor(shared), FakeTensor(FakeStorage(2, 10))])
    assert counts["FakeTensor"] == 3
    assert 1_000_010 <= sizes["FakeTensor"] < 1_000_010 + 3 * 100


def test_gauges_drop_a_broken_gauge_and_keep_the_rest() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = GaugesSampler({"ok": lambda: 3, "bad": lambda: 1 / 0}, interval_s=0.5)
    sampler.start(sink, clock)
    sampler.poll(0.5, ops=7)
    dropped = [r for r in sink.records if r.get("name") == "gauge_dropped"]
    assert [r["gauge"] for r in dropped] == ["bad"]
    assert [r["values"] for r in sink.of("gauges")] == [{"ok": 3.0}, {"ok": 3.0}]


def test_objects_sampler_reports_growth_between_windows() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = ObjectsSampler(interval_s=10.0)
    sampler.start(sink, clock)
    kept = [Node() for _ in range(2000)]
    sampler.poll(10.0, ops=1)
    first, second = sink.of("objects")
    assert first["growth"] == {}
    assert second["growth"]["Node"] == 2000 and second["counts"]["Node"] >= 2000
    del kept


def test_type_counts_are_objgraphs_short_name_typestats() -> None:
    class Node:  # a second type named Node: counted under one name, as objgraph does
        pass

    objects = gc.get_objects() + [Node() for _ in range(30)]
    assert type_counts(objects) == objgraph.typestats(objects, shortnames=True)
    assert type_counts(objects)["Node"] >= 30


def uss_read_takes(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Make every USS read measure ``seconds`` (the real one's cost depends on the machine)."""
    ticks = itertools.count(step=seconds)  # read before and after: they differ by one step
    monkeypatch.setattr(rss_module, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))


def test_rss_sampler_reads_uss_at_its_own_lower_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, sink = FakeClock(), Recorder()
    uss_read_takes(monkeypatch, 0.001)
    sampler = RssSampler(interval_s=0.1, uss_interval_s=1.0, guard_s=None)
    sampler.start(sink, clock)
    for i in range(1, 21):
        clock.now = i * 0.1
        sampler.poll(clock.now, ops=i)
    sampler.stop()
    lines = sink.of("rss")
    with_uss = [r for r in lines if r["uss"] is not None]
    assert len(lines) == 22 and 2 <= len(with_uss) <= 4
    assert all(r["rss"] > 0 for r in lines) and lines[-2]["ops"] == 20


def test_rss_sampler_reads_uss_less_often_when_it_is_costly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 20 ms USS read (a process of many GB) is spaced to keep within 0.2% of wall time."""
    clock, sink = FakeClock(), Recorder()
    uss_read_takes(monkeypatch, 0.02)
    sampler = RssSampler(interval_s=0.1, uss_interval_s=1.0, guard_s=None)
    sampler.start(sink, clock)
    for i in range(1, 201):  # 20 s on the fake clock
        clock.now = i * 0.1
        sampler.poll(clock.now, ops=i)
    with_uss = [r["t"] for r in sink.of("rss") if r["uss"] is not None]
    assert 2 <= len(with_uss) <= 3  # every >= 10 s instead of every 1 s
    assert all(b - a >= 10.0 - 1e-6 for a, b in itertools.pairwise(with_uss))


def test_rss_guard_samples_only_while_the_loop_is_stuck() -> None:
    """Polled on time, the guard stays quiet; when the loop stops polling it samples."""
    clock, sink = FakeClock(), Recorder()
    sampler = RssSampler(interval_s=0.1, uss_interval_s=1.0, guard_s=0.01)
    sampler.start(sink, clock)
    try:
        for i in range(1, 11):  # the loop polls on time; the guard sees fresh samples
            clock.now = i * 0.1
            sampler.poll(clock.now, ops=i)
            time.sleep(0.02)
        assert len(sink.of("rss")) == 11
        clock.now = 5.0  # a step that never returns: the loop stops polling
        deadline = time.monotonic() + 5.0
        while len(sink.of("rss")) < 12 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sampler.stop()
    stuck = [r for r in sink.of("rss") if r["t"] == 5.0]
    assert len(stuck) >= 2 and stuck[0]["ops"] == 10  # the guard's sample(s), then stop's


def test_malloc_trim_probe_reports_rss_around_the_trim() -> None:
    sampler, sink = MallocTrimSampler(), Recorder()
    if sampler.unavailable():
        pytest.skip(sampler.unavailable() or "")
    sampler.start(sink, FakeClock())
    sampler.stop()
    (probe,) = [r for r in sink.records if r.get("name") == "malloc_trim"]
    assert probe["rss_after"] > 0 and probe["released"] == probe["rss_before"] - probe["rss_after"]


def test_sampling_thousands_of_times_does_not_grow(tmp_path: Path) -> None:
    """5000 polls of every sampler (500 s on a fake clock): no object growth.

    Measured in a child process whose heap is the samplers' own, as a worker's is: in
    the test process every heap walk would also walk pytest and every test module."""
    done = subprocess.run([sys.executable, "-m", "tests.harness.sampling_growth", str(tmp_path)],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    print("sampler growth over 5000 polls:", json.dumps(report))
    assert abs(report["objects"]) < 100, report
    assert report["traced_bytes"] < 64_000, report
    assert report["rss_bytes"] < 8_000_000, report
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    assert len(lines) > 5000  # it really sampled: one RSS line per poll and more
