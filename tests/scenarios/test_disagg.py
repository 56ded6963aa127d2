"""Disaggregated prefill and decode: each side takes every PD exit and balances its books;
each incident (SGLang #17483, #15439) shows as a stale entry naming its pool and path."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.api import RunContext
from harness.registry import load_scenario
from refcache import factories
from refcache.disagg_pools import MetadataBuffers, MetadataIdxAllocator
from refcache.pools import PoolError
from scenarios import pd_decode, pd_prefill
from scenarios.workloads.disagg import missing_calls
from scenarios.workloads.disagg_decode import DecodeScheduler
from scenarios.workloads.disagg_load import PD_PATHS
from scenarios.workloads.disagg_prefill import PrefillScheduler
from scenarios.workloads.disagg_sides import make_scheduler
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic, TrafficShape
from tests.scenarios.doubles import worst_idle

SHAPE = TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=32)
PREFILL_OPTIONS = {"kv_size": 2048, "host_size": 4096, "storage_pages": 16384,
                   "prefetch_threshold": 16, "prefetch_ticks": 4, "metadata_size": 32}
STEPS = 900


def drive(cache: Any, load: Load, inject: tuple[str, ...] = (), steps: int = STEPS
          ) -> tuple[Scheduler, int]:
    """Run ``load``; return the scheduler and the worst idle finding seen."""
    scheduler = make_scheduler(cache, Traffic.seeded(0, SHAPE), load, 0, inject)
    return scheduler, worst_idle(scheduler, steps)


@pytest.mark.integration
@pytest.mark.parametrize("side", ["prefill", "decode"])
def test_each_side_takes_every_pd_exit_and_balances(side: str) -> None:
    cache: Any = (factories.pd_prefill_cache(**PREFILL_OPTIONS) if side == "prefill"
                  else factories.pd_decode_cache(kv_size=4096))
    load = pd_prefill.LOAD if side == "prefill" else pd_decode.LOAD
    try:
        scheduler, worst = drive(cache, load)
        assert isinstance(scheduler, PrefillScheduler if side == "prefill" else DecodeScheduler)
        assert worst == 0, "the fixed side's idle books, locks or tables were off"
        taken = {path for path in (*PD_PATHS, "abort-waiting") if scheduler.exits[path] > 0}
        assert taken == {*PD_PATHS, "abort-waiting"}
        assert scheduler.idle_check.checks > 20 and scheduler.finished > 100
        scheduler.drain()
        cache.sanity_check()
    finally:
        cache.close()


@pytest.mark.integration
@pytest.mark.parametrize(("inject", "table", "paths"), [
    ("pd-abort-waiting-metadata", "metadata_buffers", {"abort-waiting"}),
    ("pd-bootstrap-failure-prefetch", "ongoing_prefetch", {"bootstrap-failure"}),
])
def test_each_incident_is_a_stale_entry_of_its_pool_and_path(
        inject: str, table: str, paths: set[str]) -> None:
    cache = factories.pd_prefill_cache(**PREFILL_OPTIONS)
    try:
        scheduler, worst = drive(cache, pd_prefill.LOAD, (inject,), steps=300)
        assert worst > 0
        stale = scheduler.idle_check.stale_tables
        assert set(stale) == {table}
        assert set(stale[table].values()) <= paths
    finally:
        cache.close()


@pytest.mark.parametrize(("scenario", "target"), [
    ("pd-prefill", "refcache.factories:hiradix_cache"),
    ("pd-decode", "examples.own_cache:make"),
])
def test_a_users_cache_without_the_pd_calls_runs_the_scenario_and_says_what_it_skips(
        scenario: str, target: str) -> None:
    w = load_scenario(scenario).build(RunContext(seed=0, target=target))
    try:
        for _ in range(200):
            w.step()
        said = w.notes()["disagg_not_taken"]
        assert "alloc_metadata_buffer(req)" in said and "transfer-failure" in said
        assert type(w.scheduler) is Scheduler and w.scheduler.finished > 0
    finally:
        w.close()


def test_a_cache_without_the_pd_calls_runs_as_one_engine_and_says_why() -> None:
    cache = factories.hiradix_cache(kv_size=2048, host_size=4096)
    reason = missing_calls(cache, pd_prefill.LOAD)
    assert reason is not None and "alloc_metadata_buffer(req)" in reason
    assert "bootstrap-failure" in reason
    assert type(make_scheduler(cache, Traffic.seeded(0, SHAPE), pd_prefill.LOAD)) is Scheduler
    decode = factories.radix_cache(kv_size=2048)
    said = missing_calls(decode, pd_decode.LOAD)
    assert said is not None and "alloc_req_slot(req)" in said
    assert missing_calls(decode, dataclasses.replace(pd_decode.LOAD, disagg=None)) is None


def test_metadata_rows_refuse_a_double_free_and_are_zeroed_when_freed() -> None:
    rows, buffers = MetadataIdxAllocator(2), MetadataBuffers(2)
    first = rows.alloc()
    assert first == 0 and rows.alloc() == 1 and rows.alloc() is None
    buffers.write(first, 7, 99)
    buffers.clear(first)
    assert int(buffers.bootstrap_room[first].abs().sum()) == 0
    rows.free(first)
    with pytest.raises(PoolError):
        rows.free(first)
    with pytest.raises(PoolError):
        rows.free(5)


def test_the_books_count_rows_held_and_those_in_transfer() -> None:
    cache = factories.pd_decode_cache(kv_size=256, metadata_size=4, req_slots=3)
    from refcache.req import Req
    req = Req(1, list(range(8)))
    assert cache.alloc_req_slot(req) and cache.alloc_metadata_buffer(req)
    books = cache.pool_accounting()
    assert (books["metadata"].protected, books["metadata"].in_transfer) == (1, 1)
    assert (books["req_slots"].available, books["req_slots"].in_transfer) == (2, 1)
    cache.free_metadata_buffer(req)
    assert cache.pool_accounting()["req_slots"].in_transfer == 0
    assert cache.request_tables() == {"metadata_buffers": [], "req_slots": [1]}
    cache.free_req_slot(req)
    cache.sanity_check()


@pytest.mark.integration
def test_a_stale_entrys_note_names_the_pool_its_table_holds() -> None:
    w = load_scenario("pd-prefill").build(
        RunContext(seed=0, inject=("pd-abort-waiting-metadata",)))
    try:
        for _ in range(300):
            w.step()
        stale = w.notes()["stale_request_entries"]
        assert list(stale) == ["metadata_buffers (metadata pool)"]
        assert set(stale["metadata_buffers (metadata pool)"].values()) == {"abort-waiting"}
    finally:
        w.cache.close()  # not w.close(): its end-of-run check would fail on the rows kept
