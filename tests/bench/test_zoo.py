"""The leak zoo's targets, driven in-process by the scenarios' scheduler for about a second.

Paced leaks must keep their ledger at the asked rate (within 20%: a payment
waits for a quantum, and a lock pins a whole path at once); non-leaks must
stay bounded; every target must pass the cache's own idle check after a
drain. Rates here are higher than the defaults so a second covers many quanta.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.zoo import targets
from bench.zoo.base import LEDGER_GAUGE, ZooCache
from bench.zoo.ledger import Ledger, fresh_tokens, list_bytes
from harness.api import load_callable
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic

# Each test runs the scenarios' workload on a zoo cache for about a second.
pytestmark = pytest.mark.integration

DRIVE_S = 1.0
SEED = 7
BYTES_RATE = 360e6  # 100 kB/s
# Per paced target: options for a one-second test (rate high enough for its quantum).
PACED: dict[str, dict[str, Any]] = {
    "dict_retention": {"rate": BYTES_RATE},
    "tensor_views": {"rate": 1.2e9},  # 16 KiB quanta
    "native_malloc": {"rate": BYTES_RATE},
    "evicted_cycles": {"rate": 4.7e9},  # 64 KiB quanta
    "lock_leak": {"rate": 36e6, "kv_size": 65536},  # 10k tokens/s; paths of up to ~500
    "idle_leak": {"rate": BYTES_RATE},
    "small_objects": {"rate": BYTES_RATE},
    "mmap_pages": {"rate": BYTES_RATE},
    "slow_leak": {"rate": BYTES_RATE},
    "thread_leak": {"rate": 72_000},  # 20 threads a second
    "file_leak": {"rate": 72_000},  # 20 files a second
}


def drive(cache: Any, load: dict[str, Any], seconds: float = DRIVE_S) -> Scheduler:
    scheduler = Scheduler(cache, Traffic.seeded(SEED), Load(**load))
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        scheduler.step()
    return scheduler


Build = Callable[..., ZooCache]


@pytest.fixture
def build() -> Iterator[Build]:
    """Builds zoo caches by target name and closes them after the test."""
    built: list[ZooCache] = []

    def make(name: str, **options: Any) -> ZooCache:
        built.append(getattr(targets, name)(**options))
        return built[-1]

    yield make
    for cache in built:
        cache.close()


@pytest.mark.parametrize("name", sorted(PACED))
def test_paced_leak_keeps_its_ledger_at_the_rate(name: str, build: Build) -> None:
    cache = build(name, **PACED[name])
    scheduler = drive(cache, dict(targets.BY_NAME[name].load))
    due, held = cache.ledger.due(), cache.stats()[LEDGER_GAUGE]
    assert held == pytest.approx(due, rel=0.2), f"{name}: ledger {held:.0f}, due {due:.0f}"
    scheduler.drain()
    cache.sanity_check()


def test_every_zoo_entry_has_a_factory_that_the_harness_can_load() -> None:
    assert {t.name for t in targets.ZOO} == set(PACED) | {
        "fixed", "bounded_memo", "sawtooth", "filling_cache"}
    for target in targets.ZOO:
        assert callable(load_callable(target.spec))
        assert target.leaks == (target.name in PACED and target.name != "slow_leak")


def test_a_mistyped_option_is_refused_not_ignored() -> None:
    with pytest.raises(TypeError, match="rat"):
        targets.dict_retention(rat=1e6)


def test_the_fixed_cache_holds_nothing(build: Build) -> None:
    cache = build("fixed")
    scheduler = drive(cache, {}, 0.3)
    assert cache.stats()[LEDGER_GAUGE] == 0
    scheduler.drain()
    cache.sanity_check()


def test_bounded_memo_fills_then_holds_its_bound(build: Build) -> None:
    cache = build("bounded_memo", memo_entries=256, value_bytes=512)
    scheduler = drive(cache, {})
    assert len(cache.memo) == 256
    held = cache.ledger.total
    drive_more(scheduler, 0.3)
    per_entry = 512 + 200  # bytes object and digest int, generously
    assert cache.ledger.total <= 256 * per_entry + 16_384  # plus the dict's table
    assert cache.ledger.total == pytest.approx(held, rel=0.05)
    scheduler.drain()
    cache.sanity_check()


def drive_more(scheduler: Scheduler, seconds: float) -> None:
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        scheduler.step()


def test_sawtooth_rises_and_falls(build: Build) -> None:
    cache = build("sawtooth", sawtooth_bytes=1 << 20, period_s=0.2)
    scheduler = Scheduler(cache, Traffic.seeded(SEED), Load())
    seen = set()
    began = time.monotonic()
    while time.monotonic() - began < DRIVE_S:
        scheduler.step()
        seen.add(cache.stats()[LEDGER_GAUGE])
    assert seen == {0.0, float(1 << 20)}
    scheduler.drain()
    cache.sanity_check()


def test_filling_cache_grows_until_the_pool_is_full_then_stops(build: Build) -> None:
    cache = build("filling_cache", capacity=20_000)
    scheduler = drive(cache, {})
    full = cache.stats()[LEDGER_GAUGE]
    assert 0.9 * 8 * 20_000 <= full <= 8 * 20_000
    drive_more(scheduler, 0.3)
    assert cache.stats()[LEDGER_GAUGE] <= 8 * 20_000
    scheduler.drain()
    cache.sanity_check()


def test_lock_leak_leaves_tokens_locked_after_the_drain(build: Build) -> None:
    cache = build("lock_leak", **PACED["lock_leak"])
    scheduler = drive(cache, {}, 0.5)
    scheduler.drain()
    cache.sanity_check()  # the accounting still agrees: the tokens are locked, not lost
    locked = cache.full_protected_size()
    assert locked > 0 and locked == cache.ledger.total == cache.stats()["zoo_locked_tokens"]
    cache.evict(cache.kv_pool.size)  # everything it can
    assert cache.full_protected_size() == locked  # eviction cannot take them back
    assert cache.kv_pool.available_size() == cache.kv_pool.size - locked


def test_evicted_cycles_are_garbage_that_only_a_gen2_collection_frees(build: Build) -> None:
    cache = build("evicted_cycles", **PACED["evicted_cycles"])
    gc.disable()  # no automatic collection: which one frees the cycles is up to the test
    try:
        scheduler = drive(cache, {}, 0.5)
        scheduler.drain()
        cache.sanity_check()
        alive = cache.stats()["zoo_cycles_alive_bytes"]
        assert alive == cache.ledger.total > 0
        gc.collect(1)  # ages the chain's held first record into gen 2, which lets it go
        gc.collect(0)
        gc.collect(1)
        assert cache.stats()["zoo_cycles_alive_bytes"] == alive  # young collections: nothing
        gc.collect(2)
        assert cache.stats()["zoo_cycles_alive_bytes"] == 0  # unreachable: gen 2 freed all
        assert cache.ledger.total == alive  # the ledger counts what entered cycles
    finally:
        gc.enable()
    cache.close()
    assert cache._aged not in gc.callbacks  # type: ignore[attr-defined]


def test_idle_leak_retains_nothing_while_the_scheduler_is_busy(build: Build) -> None:
    """Every audit it keeps was taken with nothing in flight.

    A steady load is busy nearly always, but not at every step (the first
    step, a dropped request), so the check is per audit, not "none at all".
    """
    cache = build("idle_leak", rate=BYTES_RATE)
    kept_while_busy = []
    audit = cache.check_hicache_events

    def watched() -> None:
        before, busy = len(cache.audits), cache.in_flight > 0
        audit()
        if busy and len(cache.audits) > before:
            kept_while_busy.append(cache.in_flight)

    cache.check_hicache_events = watched  # type: ignore[method-assign]
    scheduler = drive(cache, {}, 0.5)  # steady load
    assert kept_while_busy == []
    assert cache.ledger.total == sum(a.untyped_storage().nbytes() for a in cache.audits)
    scheduler.drain()
    cache.sanity_check()


def test_ledger_pays_in_quanta_and_counts_fresh_ints_exactly() -> None:
    now = [0.0]
    ledger = Ledger(3600.0 * 10_000, quantum=4096, clock=lambda: now[0])
    now[0] = 0.3
    assert ledger.owed() == 0  # 3000 due: under a quantum
    now[0] = 1.0
    assert ledger.owed() == 10_000
    tokens = fresh_tokens([1, 300, 70_000], 5)
    assert tokens == [1, 300, 70_000, 1, 300]
    assert list_bytes(tokens) == 56 + 8 * 5 + 3 * 28  # 1 is a shared small int
