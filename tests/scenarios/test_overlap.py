"""Overlap scheduling (``scenarios.workloads.overlap``) and SGLang #11981 at its site.

In-process on radix-overlap's load and cache, fixed seeds: the fixed result
processing frees every slot a batch in flight held for a request that left; the
v0.5.3.post3 path loses exactly one per request retracted with a batch in flight;
overlap off leaves every existing trace as it was; a cache without the slot
calls runs with overlap skipped, and the doctor says so.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from harness.api import RunContext
from harness.registry import check_injections, load_scenario
from refcache import factories
from scenarios.radix_overlap import OVERLAP_LOAD
from scenarios.workloads.conformance import diagnose
from scenarios.workloads.exits import RETRACT
from scenarios.workloads.overlap import REGRESSION, missing_calls
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic, TrafficShape
from tests.scenarios.test_exits import FAMILIES, SHAPE

STEPS = 800
KV = 2048  # radix-overlap's pool


def overlap_scheduler(inject: tuple[str, ...] = (), seed: int = 0) -> Scheduler:
    cache = factories.radix_cache(inject=inject, kv_size=KV)
    return Scheduler(cache, Traffic.seeded(seed, TrafficShape()), OVERLAP_LOAD, seed,
                     regressions=inject)


def drive(s: Scheduler, steps: int = STEPS) -> tuple[int, int]:
    """Run; return the retractions of requests that had a batch in flight, and the worst
    idle mismatch. A batch launched at one step is processed at the next, after that
    step's launch, the only place a request is retracted: so its retracted requests
    are those it holds whose ``left`` says retract once the step is done."""
    assert s.overlap is not None
    retracted_in_flight = worst = 0
    for _ in range(steps):
        batch = list(s.overlap.in_flight)
        s.step()
        retracted_in_flight += sum(1 for entry in batch if entry.run.left == RETRACT)
        worst = max(worst, s.idle_check.mismatch)
    return retracted_in_flight, worst


def test_the_fixed_result_processing_frees_every_slot_in_flight() -> None:
    s = overlap_scheduler()
    retracted, worst = drive(s)
    assert retracted > 10  # measured: 31 of the 34 retractions had a batch in flight
    assert s.finished > 100 and s.idle_check.checks > 30
    assert worst == 0  # finished and retracted requests' delayed slots all came back
    s.drain()
    books = s.cache.pool_accounting()["full"]
    assert (books.mismatch, books.protected) == (0, 0)
    s.cache.sanity_check()


def test_the_regression_loses_one_slot_per_request_retracted_with_a_batch_in_flight() -> None:
    """v0.5.3.post3 tested ``is_retracted`` before the overlap free (SGLang #11970)."""
    s = overlap_scheduler((REGRESSION,))
    retracted, worst = drive(s)
    assert retracted > 10 and worst > 0
    assert s.exits[RETRACT] >= retracted  # a request retracted at its first launch has none
    s.drain()
    assert s.cache.pool_accounting()["full"].mismatch == -retracted  # one token per batch


def test_overlap_off_leaves_the_traces_as_they_were_before_it() -> None:
    """Every step's ops, stats and counters, hashed: recorded at 4c5951e, before overlap
    scheduling existed. A change here changes what every existing scenario runs."""
    assert trace("radix-exits", 600) == "00875e3d1a3cd0ac"
    assert trace("mamba-pressure", 600) == "53ac8b13295eac9e"


def trace(name: str, steps: int, seed: int = 3) -> str:
    w = load_scenario(name).build(RunContext(seed=seed))
    digest = hashlib.sha256()
    try:
        for _ in range(steps):
            ops = w.step()
            s = w.scheduler
            digest.update(repr((ops, sorted(w.cache.stats().items()), s.finished, s.dropped,
                                s.rejected, s.alloc_failures, sorted(s.exits.items()),
                                s.idle_check.checks, s.idle_check.mismatch)).encode())
    finally:
        w.close()
    return digest.hexdigest()[:16]


@pytest.mark.parametrize(("target", "reason"), [
    ("examples.own_cache:make", "the cache has no alloc_tokens(n); the cache has no "
                                "free_tokens(slots); its extend_request takes no slots"),
    # KV only: a decoded token here needs an SWA slot too, which extend_request allocates.
    ("refcache.factories:swa_cache", "its extend_request takes no slots"),
])
def test_a_cache_without_the_slot_calls_runs_with_overlap_skipped(target: str,
                                                                  reason: str) -> None:
    w = load_scenario("radix-overlap").build(RunContext(seed=0, target=target))
    try:
        for _ in range(300):
            w.step()
        s = w.scheduler
        assert s.overlap is None and s.skipped_overlap == reason
        assert w.notes()["overlap_not_taken"] == reason
        assert s.finished > 0 and s.idle_check.mismatch == 0
    finally:
        w.close()


@pytest.mark.integration  # drives each family's exit load with overlap on
@pytest.mark.parametrize("family", ["mamba", "hiradix", "himamba"])
def test_every_family_with_the_slot_calls_balances_under_overlap(family: str) -> None:
    """The caches built on RadixCache inherit its slot calls; their own state (Mamba
    slots, host copies, prefetches) must still balance with a batch in flight."""
    factory, options = FAMILIES[family]
    cache: Any = factory(**options)
    try:
        assert missing_calls(cache) is None
        s = Scheduler(cache, Traffic.seeded(0, SHAPE), OVERLAP_LOAD, 0)
        retracted, worst = drive(s)
        assert retracted > 0 and worst == 0 and s.idle_check.locked == 0
        s.drain()
        cache.sanity_check()
    finally:
        cache.close()


def test_the_doctor_lists_the_overlap_calls() -> None:
    def facts(target: str) -> str:
        return "\n".join(diagnose("radix-overlap", target, seconds=0.2).facts)

    assert ("overlap-scheduling calls implemented: alloc_tokens(n), free_tokens(slots), "
            "extend_request(req, tokens, slots=...)") in facts("refcache.factories:radix_cache")
    assert ("overlap scheduling is not run (radix-overlap runs with it off): the cache has no "
            "alloc_tokens(n)") in facts("examples.own_cache:make")


def test_the_scenario_takes_the_regression_and_overlap_excludes_dllm_blocks() -> None:
    check_injections(load_scenario("radix-overlap"), (REGRESSION,))  # --inject accepts it
    with pytest.raises(ValueError, match="token-by-token"):
        Load(overlap=True, dllm_block=8)
