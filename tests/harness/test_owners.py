"""The owners sampler on hand-made growth: paths, time bound, untracked types, tensors.

Each test grows something under the module-level ``HOLDER`` between the
sampler's start and stop, on a fake clock; no worker process.
"""

from __future__ import annotations

import gc
import json
import re
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.runfiles.reader import load_samples
from harness.runfiles.samples import SampleWriter, header
from harness.worker.heapgraph import tensor_views
from harness.worker.heapgraph.census import Census, grown_types
from harness.worker.heapgraph.tensor_views import tensor_report
from harness.worker.samplers import owners
from harness.worker.samplers.owners import OwnersSampler
from tests.harness.records_check import file_problems, line_problems
from tests.harness.test_samplers import FakeClock, Recorder


class Record:
    """A grown object that takes weak references."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.meta = {"n": n}  # a dict of scalars: not tracked by the collector


class Holder:
    def __init__(self) -> None:
        self.history: dict[str, list[int]] = {}
        self.records: list[dict[str, int]] = []
        self.items: list[Record] = []
        self.views: list[Any] = []


HOLDER = Holder()
MODULE = __name__


@pytest.fixture(autouse=True)
def fresh_holder() -> Iterator[None]:
    HOLDER.__init__()  # type: ignore[misc]
    gc.collect()
    yield
    HOLDER.__init__()  # type: ignore[misc]


def run_sampler(grow: Any, sampler: OwnersSampler | None = None) -> dict[str, Any]:
    """Start, ``grow()``, stop; the owners record (checked to be plain JSON)."""
    sink = Recorder()
    sampler = sampler or OwnersSampler()
    sampler.start(sink, FakeClock())
    grow()
    sampler.stop()
    (record,) = sink.of("owners")
    json.dumps(record)  # strings and numbers only: nothing of the heap leaves the sampler
    return record


def entry(record: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [e for e in record["paths"] if e["type"] == kind]
    assert found, f"no {kind} among {[e['type'] for e in record['paths']]}"
    return found[0]


def grow_lists() -> None:
    for i in range(3000):
        HOLDER.history[f"k{i}"] = [i, i + 1]


def test_owner_path_names_the_attribute_the_key_and_the_type() -> None:
    record = run_sampler(grow_lists)
    lists = entry(record, "list")
    # The type's net count: a few lists other code in this process freed meanwhile.
    assert lists["grew"] >= 2900 and lists["tracked"] is True
    assert re.fullmatch(
        rf"{MODULE}\.HOLDER -> Holder\.history -> dict\['k\d+'\] -> list", lists["path"]
    ), lists
    assert lists["root"] == f"module {MODULE}"
    assert lists["depth"] == 3 and lists["agree"] >= lists["sampled"] - 1
    assert not record["gave_up"] and "error" not in record
    assert record["seconds"] >= record["search_seconds"] >= 0


def test_a_local_of_a_running_function_is_a_root() -> None:
    kept: dict[str, list[int]] = {}

    def grow() -> None:
        for i in range(3000):
            kept[f"k{i}"] = [i]

    lists = entry(run_sampler(grow), "list")
    name = test_a_local_of_a_running_function_is_a_root.__name__
    assert re.fullmatch(rf"frame {MODULE}\.{name} \(test_owners\.py:\d+\)\.kept -> "
                        r"dict\['k\d+'\] -> list", lists["path"]), lists
    assert re.fullmatch(rf"frame {MODULE}\.{name} at \S*test_owners\.py:\d+", lists["root"])


def test_the_search_gives_up_at_its_time_budget() -> None:
    """Every heap scan takes 2 s on a fake timer: the 3 s budget allows two."""
    now = [0.0]
    scans = []

    def slow_referrers(*objects: object) -> list[Any]:
        now[0] += 2.0
        scans.append(len(objects))
        return gc.get_referrers(*objects)

    sampler = OwnersSampler(budget_s=3.0, referrers=slow_referrers, timer=lambda: now[0])
    record = run_sampler(grow_lists, sampler)
    lists = entry(record, "list")
    assert record["gave_up"] is True
    assert lists["path"] is None and lists["why"] == "gave up after 4.0 s"
    assert len(scans) == 2  # the chain needs three levels: module dict, Holder, dict
    assert record["seconds"] == 4.0


def test_untracked_objects_are_said_to_be_and_lead_to_their_holder() -> None:
    def grow() -> None:
        HOLDER.records.extend({"a": i} for i in range(3000))

    record = run_sampler(grow)
    assert record["untracked_counted"] is True
    dicts = entry(record, "dict")
    assert not gc.is_tracked(HOLDER.records[-1])
    assert dicts["tracked"] is False and "not tracked by the GC" in dicts["note"]
    assert dicts["holder"] == "one" and dicts["gained"] >= 3000
    assert dicts["path"] == f"{MODULE}.HOLDER -> Holder.records -> list[2999] -> dict", dicts


def test_untracked_objects_held_one_each_are_voted_on() -> None:
    def grow() -> None:
        HOLDER.items.extend(Record(i) for i in range(3000))

    record = run_sampler(grow)
    dicts = entry(record, "dict")
    assert dicts["tracked"] is False and dicts["holder"] == "each"
    assert re.fullmatch(rf"{MODULE}\.HOLDER -> Holder\.items -> list\[\d+\] -> Record\.meta "
                        r"-> dict", dicts["path"]), dicts
    assert dicts["agree"] > dicts["sampled"] // 2
    # one per Record, and the list keeps the Records: it keeps the dicts' growth too
    assert dicts["holds"] >= 3000
    records = entry(record, "Record")
    assert records["tracked"] is True and records["holds"] >= 3000  # the list keeps them


def test_a_failing_search_becomes_an_error_field() -> None:
    def broken(*objects: object) -> list[Any]:
        raise RuntimeError("heap scan failed")

    record = run_sampler(grow_lists, OwnersSampler(referrers=broken))
    assert record["error"] == "RuntimeError: heap scan failed"
    assert [e["type"] for e in record["paths"]][:1] == ["list"]  # what it had stays


def test_a_failed_start_count_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_count() -> Census:
        raise MemoryError("no room")

    monkeypatch.setattr(owners, "take_census", no_count)
    record = run_sampler(grow_lists)
    assert record["error"] == "counting at start failed: MemoryError: no room"
    assert record["paths"] == []


def test_stop_keeps_no_reference_to_what_it_sampled() -> None:
    """The sampler must never be the leak: once the holder lets go, the samples die."""

    def grow() -> None:
        HOLDER.items.extend(Record(i) for i in range(3000))

    record = run_sampler(grow)
    assert entry(record, "Record")["path"] is not None  # it did sample and search them
    refs = [weakref.ref(item) for item in HOLDER.items]
    gc.disable()  # freed by reference counting alone, no collection's help
    try:
        HOLDER.items.clear()
        alive = sum(ref() is not None for ref in refs)
    finally:
        gc.enable()
    assert alive == 0


def test_tensor_report_finds_a_large_storage_kept_by_a_small_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(tensor_views, "TOP_VIEWS", 100)  # other tests' tensors may be larger

    def grow() -> None:
        base = torch.arange(131072, dtype=torch.int64)  # 1 MiB
        HOLDER.views.append(base[:16])  # 128 bytes of view; the base goes out of scope

    record = run_sampler(grow)
    assert line_problems(record) == []
    tensors = record["tensors"]
    assert tensors["count"] >= 1
    assert tensors["storage_bytes"] >= 1 << 20 and tensors["oversized"]["storages"] >= 1
    ours = [v for v in tensors["views"] if v["path"] and "Holder.views" in v["path"]]
    assert ours, tensors["views"]
    assert ours[0]["path"] == f"{MODULE}.HOLDER -> Holder.views -> list[0] -> Tensor"
    assert (ours[0]["view_bytes"], ours[0]["storage_bytes"]) == (128, 1 << 20)
    assert ours[0]["shape"] == [16] and ours[0]["ratio"] == 8192.0
    assert ours[0]["root"] == f"module {MODULE}"


def test_a_base_tensor_only_its_view_keeps_is_held_where_the_view_is() -> None:
    torch = pytest.importorskip("torch")

    def grow() -> None:
        for i in range(100):  # 100 views and the 100 bases they keep: Tensor grows by 200
            HOLDER.views.append(torch.full((64,), i, dtype=torch.int64)[:1])

    record = run_sampler(grow)
    tensors = entry(record, "Tensor")
    assert tensors["agree"] == tensors["sampled"]  # views and bases: one shape
    assert re.fullmatch(rf"{MODULE}\.HOLDER -> Holder\.views -> list\[\d+\] -> "
                        r"(Tensor\._base -> )?Tensor", tensors["path"]), tensors
    oversized = record["tensors"]["oversized"]
    assert oversized["storages"] >= 100 and oversized["example"]["path"] is not None


def test_tensor_report_sums_views_and_storages_once() -> None:
    torch = pytest.importorskip("torch")
    whole = torch.zeros(131072, dtype=torch.int64)  # owned here: not kept by its view
    head = whole[:16]
    other = torch.ones(8, dtype=torch.float32)
    # A running frame's locals are invisible to the collector: the sampler passes them.
    report = tensor_report([whole, head, other], held={id(whole)})
    summary = report.summary
    assert summary is not None
    assert summary["count"] == 3
    assert summary["view_bytes"] == (1 << 20) + 128 + 32
    assert summary["storage_bytes"] == (1 << 20) + 32 and summary["storages"] == 2
    assert summary["oversized"]["storages"] == 0 and report.views == []
    pinned = tensor_report([whole, head, other]).summary  # nothing seen holding the base
    assert pinned is not None and pinned["oversized"]["storages"] == 1
    assert pinned["oversized"]["view_bytes"] == 128


def test_no_tensor_report_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert tensor_report([object()]).summary is None


def test_growth_below_the_threshold_and_builtin_noise_are_not_searched() -> None:
    before = Census({"list": 10, "function": 5, "Thing": 1}, {})
    after = Census({"list": 500, "function": 900, "Thing": 40}, {"tuple": 80})
    assert grown_types(before, after) == [("list", 490), ("tuple", 80)]


def test_the_reader_keeps_the_owners_line(tmp_path: Path) -> None:
    record = run_sampler(grow_lists)
    path = tmp_path / "samples.jsonl"
    writer = SampleWriter(path)
    writer.write(header({"scenario": "x"}, {}))
    writer.sample("owners", record["t"], **{
        k: v for k, v in record.items() if k not in ("type", "t")})
    writer.close()
    assert file_problems(path) == []
    data = load_samples(path)
    assert len(data.owners) == 1
    assert data.owners[0]["paths"] == record["paths"] and data.owners[0]["type"] == "owners"


def test_holding_container_is_the_last_hop_when_it_is_a_container() -> None:
    from harness.worker.heapgraph.paths import holding_container

    class Holder:
        def __init__(self) -> None:
            self.kept = {i: [i] for i in range(40)}
            self.one = [1]

    holder = Holder()
    module_globals = {"holder": holder}
    assert holding_container([module_globals, holder, holder.kept, holder.kept[3]]) == 40
    # held by an attribute (through the instance's namespace), not by a container
    assert holding_container([module_globals, holder, holder.__dict__, holder.one]) == 0
    assert holding_container([module_globals, holder.one]) == 0
