"""The tensor census: storage kept alive by far smaller views, and nothing else."""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import torch

from harness.runfiles.reader import RunDataBuilder
from harness.worker.heapgraph.tensor_views import (
    PIN_RATIO,
    StorageLevels,
    count_base_refs,
    group_by_storage,
    orphan_refcount,
    storage_levels,
    tensor_report,
    tensor_types,
    tensors_among,
)
from harness.worker.samplers import tensors as census_module
from harness.worker.samplers.tensors import (
    COST_SHARE,
    QUIET_BYTES,
    QUIET_READINGS,
    QUIET_SHARE,
    TensorsSampler,
)
from tests.harness.test_samplers import FakeClock, Recorder

ELEMENTS = 100_000  # 400 KB of float32


def census_of(*held: Any) -> int:
    """Pinned bytes among the tensors in ``held`` (and their bases), all else ignored."""
    kinds = tensor_types(torch.Tensor)  # with the subclasses a test defined
    objects = tensors_among(gc.get_objects(), kinds)
    mine = {id(t) for t in held} | {id(t._base) for t in held if t._base is not None}
    chosen = [o for o in objects if id(o) in mine]
    del objects
    return storage_levels(chosen, orphan_refcount(torch, kinds)).pinned_bytes


def slice_of_fresh(elements: int, keep: int, kind: type = torch.Tensor) -> torch.Tensor:
    whole = torch.zeros(elements).as_subclass(kind)
    return whole[:keep]  # the base goes out of scope: only the view keeps it


def test_a_small_view_of_a_dropped_tensor_pins_the_rest_of_its_storage() -> None:
    view = slice_of_fresh(ELEMENTS, 10)
    assert census_of(view) == (ELEMENTS - 10) * 4


def test_a_view_whose_base_is_still_owned_pins_nothing() -> None:
    owned = torch.zeros(ELEMENTS)
    view = owned[:10]
    assert census_of(owned, view) == 0


def test_a_view_of_most_of_its_storage_pins_nothing() -> None:
    big_view = slice_of_fresh(ELEMENTS, ELEMENTS // PIN_RATIO + 1)
    assert census_of(big_view) == 0


def test_copies_pin_nothing() -> None:
    copy = slice_of_fresh(ELEMENTS, 10).clone()
    assert census_of(copy) == 0


def test_the_probe_reads_what_a_census_of_every_object_reads_on_an_orphaned_base() -> None:
    """orphan_refcount looks at its probe alone; a full census must see the same count
    on a base that only its view keeps, or every such base would read as owned."""
    kept = slice_of_fresh(64, 1)
    base_id = id(kept._base)
    kinds = tensor_types(torch.Tensor)
    tensors = tensors_among(gc.get_objects(), kinds)
    storages, bases, _ = group_by_storage(tensors)
    count_base_refs(storages, bases)
    del tensors, storages
    assert bases[base_id] == orphan_refcount(torch, kinds)


def test_the_owner_report_pins_what_the_census_pins() -> None:
    """The census tells an owned base by its reference count, the owner report by a
    referrers scan: on the same tensors both must pin the same bytes, or the report
    would contradict the tensor_pinned budget."""
    owner = [torch.zeros(ELEMENTS)]  # a base a Python list owns
    views = [owner[0][:10], slice_of_fresh(ELEMENTS, 10), slice_of_fresh(ELEMENTS, ELEMENTS // 2),
             torch.ones(8)]
    kinds = tensor_types(torch.Tensor)
    objects = tensors_among(gc.get_objects(), kinds)
    mine = {id(t) for t in (*owner, *views)} | {id(t._base) for t in views if t._base is not None}
    chosen = [o for o in objects if id(o) in mine]
    del objects
    levels = storage_levels(chosen, orphan_refcount(torch, kinds))
    report = tensor_report(chosen).summary
    assert report is not None
    oversized = report["oversized"]
    assert levels.pinned_bytes == (ELEMENTS - 10) * 4
    assert oversized["storages"] == 1
    assert oversized["storage_bytes"] - oversized["view_bytes"] == levels.pinned_bytes
    assert (report["count"], report["storage_bytes"]) == (levels.tensors, levels.storage_bytes)


def test_subclasses_are_counted_too() -> None:
    class Tagged(torch.Tensor):
        pass

    view = slice_of_fresh(ELEMENTS, 10, Tagged)
    assert census_of(view) == (ELEMENTS - 10) * 4


def test_the_sampler_writes_tensor_pinned_and_the_reader_takes_it_as_a_byte_series() -> None:
    clock, sink = FakeClock(), Recorder()
    sampler = TensorsSampler(interval_s=0.1)
    sampler.start(sink, clock)
    kept = [slice_of_fresh(ELEMENTS, 10) for _ in range(3)]
    clock.now = 0.1
    sampler.poll(0.1, ops=5)
    sampler.stop()
    lines = sink.of("tensors")
    assert len(lines) == 2 and lines[0]["ops"] == 5 and lines[0]["cpu_s"] >= 0
    assert lines[0]["tensor_pinned"] >= 3 * (ELEMENTS - 10) * 4
    builder = RunDataBuilder({})
    for line in lines:
        builder.add(line)
    series = builder.build().memory["tensor_pinned"]
    assert series.unit == "B" and series.v[0] == lines[0]["tensor_pinned"]
    del kept


def test_without_torch_imported_the_census_waits_and_says_why_at_the_end() -> None:
    code = ("from harness.worker.samplers.tensors import TensorsSampler\n"
            "from tests.harness.test_samplers import FakeClock, Recorder\n"
            "sink, sampler = Recorder(), TensorsSampler(interval_s=0.1)\n"
            "sampler.start(sink, FakeClock())\n"
            "sampler.poll(0.2, ops=1)\n"
            "sampler.stop()\n"
            "print(sink.records)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert "'tensors'" not in out.stdout  # no reading without torch
    assert "the program never imported torch" in out.stdout


def test_a_torch_still_being_imported_is_left_alone(monkeypatch: Any) -> None:
    """A recorded program imports torch on its main thread while the recorder polls:
    seen, ``partially initialized module 'torch' has no attribute 'arange'``."""
    import importlib.machinery
    import types

    half = types.ModuleType("torch")
    half.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    half.__spec__._initializing = True  # type: ignore[attr-defined]
    half.Tensor = torch.Tensor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", half)
    clock, sink = FakeClock(), Recorder()
    sampler = TensorsSampler(interval_s=0.1)
    sampler.start(sink, clock)
    sampler.poll(0.2, ops=1)
    assert sink.of("tensors") == []
    monkeypatch.setitem(sys.modules, "torch", torch)
    sampler.poll(0.4, ops=2)
    assert len(sink.of("tensors")) == 1


def test_the_census_keeps_its_cpu_time_within_its_share_of_the_run() -> None:
    """Readings wait until their CPU time so far is COST_SHARE of the time since the
    sampler started, so the first reading's and any dearer reading's cost is paid back."""
    clock, sink = FakeClock(), Recorder()
    sampler = TensorsSampler(interval_s=0.01)
    sampler.start(sink, clock)  # at t = 0
    for step in range(1, 601):
        clock.now = step * 0.05
        sampler.poll(clock.now, ops=step)
    lines = sink.of("tensors")
    assert len(lines) >= 2
    for index, line in enumerate(lines[1:], start=1):
        spent = sum(earlier["cpu_s"] for earlier in lines[:index])
        assert spent <= COST_SHARE * line["t"] + 1e-3


def test_quiet_readings_slow_the_census_down_and_a_pinned_one_speeds_it_up(
    monkeypatch: Any,
) -> None:
    """After QUIET_READINGS readings under QUIET_BYTES, a reading waits until its
    cost is QUIET_SHARE of the wait; one that finds more brings the next within a
    second, so a level that appears late is held over two readings soon after."""
    walk_s = 0.02  # what every reading costs, by the census's own clock
    cpu = iter(i * walk_s for i in range(10_000))  # each reading: its start and its end
    monkeypatch.setattr(census_module, "time", SimpleNamespace(thread_time=lambda: next(cpu)))
    pinned = [0, 0, 0, 0, 0, 4 * QUIET_BYTES, 4 * QUIET_BYTES]  # then none
    readings = iter(range(10_000))

    def census(tensors: list[object], orphan_refs: int) -> StorageLevels:
        index = next(readings)
        return StorageLevels(len(tensors), 0, pinned[index] if index < len(pinned) else 0)

    monkeypatch.setattr(census_module, "storage_levels", census)
    clock, sink = FakeClock(), Recorder()
    sampler = TensorsSampler(interval_s=1.0)
    sampler.start(sink, clock)
    for step in range(1, 1201):  # 60 s in 50 ms steps
        clock.now = step * 0.05
        sampler.poll(clock.now, ops=step)
    times = [line["t"] for line in sink.of("tensors")]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    quiet_gap = walk_s / QUIET_SHARE
    fast_gap = walk_s / COST_SHARE
    assert all(gap < fast_gap + 0.1 for gap in gaps[:QUIET_READINGS - 1])
    assert quiet_gap - 0.1 < gaps[QUIET_READINGS - 1] < quiet_gap + 0.1
    # The reading that found pinned storage (the sixth) is followed a second later.
    assert 0.99 < gaps[5] < 1.1
    assert len(times) >= 9  # and the census went quiet again after it
    assert gaps[-1] > quiet_gap - 0.1
