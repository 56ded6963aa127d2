"""Quiet stretches (``scenarios.workloads.quiet``): what the books still count in transfer
after one is held. A copy whose acknowledgement a path forgets keeps its slots "in
transfer" for ever, which the idle check excuses; the stretch's end reads it."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from harness.analysis.where.process import transfer_findings
from refcache import factories
from scenarios.workloads.exits import Exits
from scenarios.workloads.quiet import Quiet
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic, TrafficShape

SHAPE = TrafficShape(
    vocab=50, system_len=12, turn_len=6, output_len=4, conversations=8, max_context=96
)
QUIET = Quiet(every=60, rounds=10, seconds=0.0)  # no wall time: the test stays untimed
STATES: dict[str, Any] = {"conv_shape": (2,), "ssm_shape": (3,)}
HOST_CACHES = {
    "hiradix": partial(factories.hiradix_cache, kv_size=512, host_size=2048),
    "himamba": partial(factories.himamba_cache, kv_size=512, mamba_size=16, host_size=2048,
                       **STATES),
    "unified-hicache": partial(factories.unified_hicache, kv_size=512, mamba_size=16,
                               host_size=2048, **STATES),
}


def forget_one_write_ack(cache: Any) -> None:
    """The first write-through completes, but its acknowledgement is dropped: the node
    stays locked by a copy that, by the books, is still in flight."""
    controller = cache.cache_controller
    finish = controller._finish
    forgotten: list[int] = []

    def forgetful(transfer: Any) -> None:
        finish(transfer)
        if transfer.kind == "write" and not forgotten:
            forgotten.append(controller.ack_write_queue.pop())

    controller._finish = forgetful


def run(cache: Any, stretches: int = 2, max_steps: int = 3000, match_ahead: int = 0) -> Scheduler:
    load = Load(max_running=6, chunk_size=16, quiet=QUIET, exits=Exits(match_ahead=match_ahead))
    scheduler = Scheduler(cache, Traffic.seeded(0, SHAPE), load, seed=0)
    while scheduler.quiet.stretches < stretches and scheduler.steps < max_steps:
        scheduler.step()
    assert scheduler.quiet.stretches >= stretches
    return scheduler


@pytest.mark.parametrize("name", sorted(HOST_CACHES))
def test_fixed_host_tiers_hold_nothing_in_transfer(name: str) -> None:
    scheduler = run(HOST_CACHES[name]())
    assert scheduler.quiet.held == 0


def test_a_forgotten_acknowledgement_is_held_after_a_quiet_stretch() -> None:
    cache = HOST_CACHES["hiradix"]()
    forget_one_write_ack(cache)
    scheduler = run(cache)
    held = scheduler.quiet.last
    assert held is not None and held.pools.get("full", 0) > 0 and held.rounds == QUIET.rounds
    # The idle check itself excuses it: the lock counts as a copy's.
    assert scheduler.idle_check.locked == 0
    (finding,) = transfer_findings([{"type": "notes", "t": 0.0,
                                     "held_in_transfer": held.note()}])
    assert finding.text.startswith(f"full pool: {held.pools['full']:,} slots still in transfer "
                                   f"after a quiet stretch of {QUIET.rounds} event rounds")


def test_the_load_clock_stops_while_a_stretch_is_due() -> None:
    """Quiet off, the traffic clock is the step count (the traces stay as they were)."""
    plain = Scheduler(HOST_CACHES["hiradix"](), Traffic.seeded(0, SHAPE), Load(max_running=6))
    for _ in range(50):
        plain.step()
    assert plain.quiet.traffic_steps == plain.steps == 50
    quiet = run(HOST_CACHES["hiradix"](), stretches=1)
    assert quiet.quiet.traffic_steps < quiet.steps


def forget_host_releases(cache: Any) -> None:
    """Every landed or aborted prefetch forgets ``release_host``: the host node it hung
    under stays locked once nothing is in flight."""
    release = cache._release_prefetch

    def forgetful(op: Any) -> None:
        release(op)
        op.node.host_ref_counter += 1  # the decrement undone: a missing release_host

    cache._release_prefetch = forgetful


def test_a_host_lock_never_released_is_held_after_a_quiet_stretch() -> None:
    # A host tier the load overflows, so requests find their evicted pages in storage.
    prefetching = partial(factories.hiradix_cache, kv_size=128, host_size=256,
                          storage_pages=4096, prefetch_ticks=3)
    fixed = run(prefetching(), stretches=3, match_ahead=4)
    assert fixed.quiet.held == 0 and fixed.cache.prefetches > 0
    cache = prefetching()
    forget_host_releases(cache)
    scheduler = run(cache, stretches=3, match_ahead=4)
    held = scheduler.quiet.last
    assert held is not None and held.locked.get("host", 0) > 0 and not held.pools
    assert scheduler.quiet.held == held.locked["host"]
    (finding,) = transfer_findings([{"type": "notes", "t": 0.0,
                                     "held_in_transfer": held.note()}])
    assert finding.text.startswith(f"host pool: {held.locked['host']:,} slots of the tree's "
                                   "copies still locked after a quiet stretch")
