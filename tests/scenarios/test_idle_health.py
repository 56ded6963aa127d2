"""The scheduler's health gauges and SGLang's idle check (``scenarios.workloads.health``).

In-process with tiny pools and a short idle-gaps load, so idle moments come
every few dozen steps; one test runs a double in a worker to show the gauge
breaking a level budget end to end.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from harness.api import RunContext
from harness.config import RunConfig, SamplerIntervals, read_budgets
from harness.parent.runner import run
from refcache import factories
from scenarios.workloads.common import build_cache_workload
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic, TrafficShape
from tests.scenarios.doubles import LockLeakingCache, SlotLosingCache

SHAPE = TrafficShape(
    vocab=50, system_len=12, turn_len=6, output_len=4, conversations=8, max_context=96
)
LOAD = Load(pattern="idle-gaps", idle_every=30, idle_sleep_s=0.0, max_running=6, chunk_size=16)
STATES: dict[str, Any] = {"conv_shape": (2,), "ssm_shape": (3,)}
CACHES = {
    "radix": partial(factories.radix_cache, kv_size=512),
    "mamba": partial(factories.mamba_cache, kv_size=512, mamba_size=16, **STATES),
    "swa": partial(factories.swa_cache, kv_size=512, swa_size=256, sliding_window=8),
    "unified": partial(
        factories.unified_cache,
        kv_size=512,
        mamba_size=16,
        swa_size=256,
        sliding_window=8,
        **STATES,
    ),
    "hiradix": partial(factories.hiradix_cache, kv_size=256, host_size=512, kv_row_elems=2),
    "himamba": partial(
        factories.himamba_cache,
        kv_size=256,
        mamba_size=16,
        host_size=256,
        kv_row_elems=2,
        **STATES,
    ),
}
HEALTH = {"waiting", "running", "alloc_failures", "dropped", "rejected", "locked_while_idle"}


def scheduler(cache: Any, load: Load = LOAD) -> Scheduler:
    return Scheduler(cache, Traffic.seeded(1, SHAPE), load)


@pytest.mark.parametrize("kind", CACHES)
def test_books_balance_and_nothing_stays_locked_at_every_idle_moment(kind: str) -> None:
    cache = CACHES[kind]()
    s, idle = scheduler(cache), 0
    for _ in range(400):
        s.step()
        if s.running:
            continue
        idle += 1
        books = cache.pool_accounting()
        assert {name: a.mismatch for name, a in books.items()} == dict.fromkeys(books, 0)
        assert books["full"].protected == books["full"].in_transfer
        cache.sanity_check()  # the tree agrees: nothing is held outside it
    assert idle > 50 and s.idle_check.checks == idle
    assert (s.idle_check.mismatch, s.idle_check.locked) == (0, 0)
    cache.close()


def test_a_skipped_unlock_shows_as_locked_while_idle_and_the_queue_stays_bounded() -> None:
    cache = LockLeakingCache(kv_size=512, every=7)
    load = Load(
        pattern="idle-gaps",
        idle_every=30,
        idle_sleep_s=0.0,
        max_running=6,
        arrivals_per_step=3.0,
        max_waiting=10,
    )
    s, longest = scheduler(cache, load), 0
    for _ in range(600):
        s.step()
        longest = max(longest, len(s.queue))
    assert cache.skipped > 0 and s.idle_check.locked > 0
    assert longest <= 10 and s.rejected > 0
    assert s.alloc_failures > 0  # the locked paths fill the pool: admission starts failing
    # The cause: nodes still locked at idle, and the call sites that locked them.
    unreleased = s.idle_check.unreleased
    assert 0 < unreleased["nodes"] <= cache.skipped
    assert unreleased["sites"][0]["site"].startswith("refcache/radix.py:")
    assert "(alloc_request)" in " ".join(site["site"] for site in unreleased["sites"])


def test_the_lock_ledger_forgets_released_nodes_and_keeps_none_alive() -> None:
    import gc
    import weakref

    cache = CACHES["radix"]()
    s = scheduler(cache)
    for _ in range(400):
        s.step()
    assert s.idle_check.ledger is not None and s.idle_check.unreleased == {}
    held = s.idle_check.ledger.still_locked()
    assert held["nodes"] <= len(s.running) * 2  # only what running requests lock
    probe = type("Node", (), {"lock_ref": 1})()  # a node left locked
    s.idle_check.ledger._locked(probe)  # what the wrapper records after inc_lock_ref
    assert s.idle_check.ledger.still_locked()["nodes"] == held["nodes"] + 1
    ref = weakref.ref(probe)
    del probe
    gc.collect()
    assert ref() is None  # the ledger remembers it without keeping it alive
    cache.close()


def test_slots_lost_at_idle_show_as_the_mismatch() -> None:
    s = scheduler(SlotLosingCache(kv_size=512, lost=3))
    for _ in range(200):
        s.step()
    assert s.idle_check.checks > 0
    assert (s.idle_check.mismatch, s.idle_check.locked) == (3, 0)


def test_the_workload_publishes_the_health_gauges() -> None:
    w = build_cache_workload(
        RunContext(seed=1), "refcache.factories:radix_cache", {"kv_size": 512}, LOAD, SHAPE
    )
    for _ in range(100):
        w.step()
    values = {name: gauge() for name, gauge in w.gauges().items()}
    w.close()
    assert HEALTH | {"idle_pool_mismatch", "idle_checks", "tree_nodes"} <= set(values)
    assert values["idle_checks"] > 0 and values["idle_pool_mismatch"] == 0
    assert values["running"] + values["waiting"] > 0


def test_a_cache_without_books_publishes_no_idle_check_gauges() -> None:
    w = build_cache_workload(
        RunContext(seed=1),
        "tests.scenarios.doubles:cache_without_books",
        {"kv_size": 512},
        LOAD,
        SHAPE,
    )
    for _ in range(100):
        w.step()
    names = set(w.gauges())
    locked = w.gauges()["locked_while_idle"]()
    w.close()
    assert names >= HEALTH and not {"idle_pool_mismatch", "idle_checks"} & names
    assert locked == 0


@pytest.mark.integration
def test_a_lock_leak_breaks_the_idle_budget_in_a_worker(tmp_path: Path) -> None:
    config = RunConfig(
        scenario="radix-idle",
        rundir=str(tmp_path),
        duration_s=1.0,
        warmup_s=0.3,
        target="tests.scenarios.doubles:lock_leaking_cache",
        options={"cache": {"kv_size": 2048, "every": 20}},
        intervals=SamplerIntervals(rss_s=0.05, gauges_s=0.1, objects_s=1.0, garbage_s=1.0),
        samplers=("gauges", "rss"),  # the level budgets need only the gauges
        budgets=read_budgets(("idle_pool_mismatch: <= 0", "locked_while_idle: <= 0"), "budgets"),
    )
    outcome = run(config)
    assert outcome.verdict == "leak", outcome.reasons
    assert any("'locked_while_idle: <= 0'" in reason for reason in outcome.reasons)
