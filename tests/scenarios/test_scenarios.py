"""Every scenario runs, with tiny settings, in-process: fixed, injected, and on
a foreign cache. The worker-process path is covered by tests/harness and by the
detection-matrix test; here the point is that each scenario's workload drives
its cache to the incident's signature within a few thousand operations.

Every test that builds a scenario is ``integration``; the completeness guard
at the end only compares two lists, so it stays in the quick loop."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from harness.api import RunContext
from harness.registry import load_scenario, scenario_names
from scenarios.workloads.common import QUIET, STATS_MAX_AGE_S

TINY: dict[str, Any] = {"load": {"max_running": 8}}
# The host-tier scenarios' quiet stretches without their second of wall time, which would
# take most of a 1,500-step test (scenarios.workloads.quiet).
QUIET_SCENARIOS = ("hiradix-exits", "hiradix-multiturn", "himamba-exits", "himamba-stale-leaf",
                   "unified-hicache-exits")
TINY_QUIET: dict[str, Any] = {"load": {**TINY["load"], "quiet": replace(QUIET, seconds=0.0)}}
LRU = ["mamba-lru", "swa-lru", "unified-lru"]
PP = ["hiradix-pp-sync", "unified-pp-sync"]
IDLE = ["radix-idle", "mamba-pressure", "radix-dllm"]  # idle gaps: the idle books are read often
HOST = ["himamba-stale-leaf", "hiradix-multiturn"]
# Requests also abort, time out, fail and are retracted (scenarios.workloads.exits).
EXITS = ["radix-exits", "mamba-exits", "swa-exits", "unified-exits", "hiradix-exits",
         "himamba-exits", "unified-hicache-exits"]
OVERLAP = ["radix-overlap"]  # the exit load under overlap scheduling (tests/scenarios/test_overlap)
SESSIONS = ["mamba-sessions", "unified-sessions"]  # tests/scenarios/test_sessions
DISAGG = ["pd-prefill", "pd-decode"]  # one side of PD each (tests/scenarios/test_disagg)
SPEC = ["swa-spec", "unified-spec"]  # EAGLE speculative decoding, bigram keys
FIXED = ["radix-steady", "radix-long-context", *IDLE, *LRU, *HOST, *PP, *EXITS,
         *OVERLAP, *SESSIONS, *DISAGG, *SPEC]  # every scenario


@contextmanager
def workload(name: str, inject: tuple[str, ...] = (), target: str | None = None) -> Iterator[Any]:
    options = TINY_QUIET if name in QUIET_SCENARIOS else TINY
    ctx = RunContext(seed=1, inject=inject, target=target, options=options)
    w = load_scenario(name).build(ctx)
    try:
        yield w
    finally:
        w.close()


def steps(w: Any, n: int) -> int:
    return sum(w.step() for _ in range(n))


@pytest.mark.integration
@pytest.mark.parametrize("name", FIXED)
def test_fixed_scenario_runs_and_stays_clean(name: str) -> None:
    gc.collect()
    with workload(name) as w:
        ops = steps(w, 150 if name in PP else 600 if name in SPEC else 1500)
        values = {k: g() for k, g in w.gauges().items()}
        declared = w.notes()["expects"]
    assert ops > 0
    # Everything the run must see to be judged (harness.analysis.seen) happened.
    assert not [k for k in declared if values[k] < 1], values
    assert values.get("detached_alive_nodes", 0) == 0
    assert values.get("work_list", 0) <= 2
    assert values["idle_pool_mismatch"] == 0 and values["locked_while_idle"] == 0


@pytest.mark.integration
@pytest.mark.parametrize("name", LRU)
def test_lru_unlink_leaves_detached_nodes(name: str) -> None:
    scenario = load_scenario(name)
    gc.collect()
    gc.disable()
    try:
        with workload(name, scenario.regressions) as w:
            steps(w, 1500)
            detached = w.gauges()["detached_alive_nodes"]()
    finally:
        gc.enable()
    assert detached > 50


@pytest.mark.integration
def test_a_mamba_slot_kept_by_a_failed_schedule_shows_in_the_idle_books() -> None:
    ctx = RunContext(seed=1, inject=("mamba-slot-failed-schedule",), options=TINY)
    w = load_scenario("mamba-pressure").build(ctx)
    try:
        mismatch = 0.0
        for _ in range(1500):
            try:
                w.step()
            except MemoryError:  # every slot kept: what production's idle check killed
                break
            mismatch = max(mismatch, w.gauges()["idle_pool_mismatch"]())
        failures = w.gauges()["alloc_failures"]()
    finally:
        w.cache.close()  # not w.close(): its end-of-run check would fail on the lost slots
    assert failures > 0 and mismatch > 0


@pytest.mark.integration
def test_a_cached_dllm_draft_shows_in_the_idle_books_before_its_double_free() -> None:
    from refcache.pools import PoolError

    ctx = RunContext(seed=1, inject=("radix-dllm-inflight-block",), options=TINY)
    w = load_scenario("radix-dllm").build(ctx)
    mismatch = 0.0
    try:
        for _ in range(1500):
            try:
                w.step()
            except PoolError:  # a draft's node evicted: slots another node holds freed
                break
            mismatch = max(mismatch, w.gauges()["idle_pool_mismatch"]())
    finally:
        w.cache.close()  # not w.close(): its end-of-run check would fail on the books
    assert mismatch > 0  # more in the books than the pool holds: SGLang's idle check


def host_index_bytes(cache: Any) -> tuple[int, int]:
    """Bytes of the storages behind the tree's host indices, and of the indices."""
    values = [n.host_value for n in cache.iter_nodes()
              if getattr(n, "host_value", None) is not None]
    storages = {v.untyped_storage().data_ptr(): v.untyped_storage().nbytes() for v in values}
    return sum(storages.values()), sum(v.numel() * v.element_size() for v in values)


@pytest.mark.integration
@pytest.mark.parametrize("inject", [(), ("hiradix-host-indices-view",)])
def test_multiturn_prefetches_and_host_views_pin_free_list_storages(
    inject: tuple[str, ...]
) -> None:
    with workload("hiradix-multiturn", inject) as w:
        steps(w, 600)
        kept, indices = host_index_bytes(w.cache)
        prefetches = w.gauges()["prefetches"]()
    assert prefetches > 100  # every new request tries the storage first
    if inject:
        assert kept > 50 * indices  # each view keeps a whole free list alive
    else:
        assert kept == indices


@pytest.mark.integration
def test_stale_host_leaf_crashes_at_the_non_leaf_check_after_a_backup_gap() -> None:
    crash = pytest.raises(AssertionError, match="non-leaf")
    ctx = RunContext(seed=1, inject=("himamba-stale-host-leaf",), options=TINY)
    w = load_scenario("himamba-stale-leaf").build(ctx)
    gaps, backup_gaps = 0, w.gauges()["backup_gaps"]
    with crash as info:
        for _ in range(3_000):
            w.step()
            # Every step: under way from the start, the traffic crashes it within
            # about a hundred steps, ten after the first gap. The gauges share one
            # stats() call for STATS_MAX_AGE_S: wait it out, or a gap that opens a
            # few steps before the crash goes unseen (2 runs in 6 without the wait).
            time.sleep(STATS_MAX_AGE_S)
            gaps = max(gaps, backup_gaps())
    w.cache.close()  # not w.close(): its idle check would fail on the broken tree
    names = {frame.name for frame in info.traceback}
    assert {"_evict_device_tokens", "_evict_regular"} <= names
    assert gaps > 0  # a backed-up node under a parent without one: 0.5.10's state


@pytest.mark.integration
def test_the_fixed_host_tier_serves_hits_and_keeps_backups_a_subtree_at_the_root() -> None:
    with workload("himamba-stale-leaf") as w:
        steps(w, 3000)
        gauges = w.gauges()
        loaded, gaps = gauges["kv_tokens_loaded_back"](), gauges["backup_gaps"]()
    assert loaded > 300  # demoted prefixes come back from the host (measured: 2,824)
    assert gaps == 0


def pinned_now() -> int:
    """The tensor census of this process, as the worker's sampler takes it."""
    import torch

    from harness.worker.heapgraph.tensor_views import (
        orphan_refcount,
        storage_levels,
        tensor_types,
        tensors_among,
    )

    kinds = tensor_types(torch.Tensor)
    tensors = tensors_among(gc.get_objects(), kinds)
    return storage_levels(tensors, orphan_refcount(torch, kinds)).pinned_bytes


@pytest.mark.integration
def test_long_chats_with_split_views_pin_whole_requests() -> None:
    gc.collect()
    with workload("radix-long-context") as w:
        steps(w, 1500)
        fixed = pinned_now()
    with workload("radix-long-context", ("radix-split-views",)) as w:
        steps(w, 1500)
        injected = pinned_now()
    assert fixed < 100_000  # an allocator's free-list head at most (measured: under 25 KB)
    assert injected > 1_000_000  # the budget's level (measured: 1.4 to 4.5 MB)


@pytest.mark.integration
@pytest.mark.parametrize("name", PP)
def test_pp_sync_no_drain_piles_up_work(name: str) -> None:
    regression = load_scenario(name).regressions
    with workload(name, regression) as w:
        steps(w, 100)
        assert w.gauges()["work_list"]() >= 100


@pytest.mark.integration
@pytest.mark.parametrize("name", ["radix-steady", "radix-idle", "radix-dllm", *LRU,
                                  "himamba-stale-leaf"])
def test_scenarios_run_unchanged_on_a_foreign_cache(name: str) -> None:
    with workload(name, target="examples.own_cache:make") as w:
        ops = steps(w, 800)
        blocks = w.gauges()["blocks"]()
    assert ops > 800 and blocks > 0


def test_every_scenario_file_is_run_fixed() -> None:
    """A scenario file added without a fixed run here fails this test, in any order
    and under ``-k``: it compares the parametrized list, not what has run so far."""
    assert sorted(FIXED) == scenario_names()


def test_a_factory_gets_only_the_options_it_names_or_all_with_kwargs() -> None:
    from scenarios.workloads.common import call_factory

    def narrow(kv_size: int) -> dict[str, int]:
        return {"kv_size": kv_size}

    def wide(kv_size: int, **rest: object) -> dict[str, object]:
        return {"kv_size": kv_size, **rest}

    options = {"inject": (), "kv_size": 64, "mamba_size": 8, "pp_lag_s": 0.1}
    assert call_factory(narrow, options) == {"kv_size": 64}
    assert call_factory(wide, options) == options


@pytest.mark.integration
def test_the_eagle_frontier_regression_frees_kv_the_tree_holds() -> None:
    """swa-spec under incident 14: the idle books count more than the pool, or a slot
    the tree still held is freed again (SGLang's allocator frees it silently)."""
    from refcache.pools import PoolError

    ctx = RunContext(seed=1, inject=("swa-eagle-frontier",), options=TINY)
    w = load_scenario("swa-spec").build(ctx)
    mismatch, raised = 0.0, None
    try:
        for _ in range(1500):
            try:
                w.step()
            except PoolError as exc:
                raised = str(exc)
                break
            mismatch = max(mismatch, w.gauges()["idle_pool_mismatch"]())
    finally:
        w.cache.close()  # not w.close(): its end-of-run check would fail on the books
    assert mismatch > 0 or (raised is not None and raised.startswith("kv: double free"))


def test_speculation_is_skipped_and_said_on_a_cache_without_draft_frees() -> None:
    with workload("swa-spec", target="examples.own_cache:make") as w:
        ops = steps(w, 300)
        notes = w.notes()
    assert ops > 300 and "reject_draft_tokens(req, n)" in notes["speculation_not_taken"]
    assert "drafts_rejected" not in notes["expects"]
