"""Slot provenance (``scenarios.workloads.slots``): the slots a pool's idle books miss,
named by the call that allocated them and the exit path their requests left by."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from harness.analysis.where.books import book_findings
from harness.runfiles.records import NotesLine
from refcache import factories
from scenarios.workloads.exits import Exits
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic, TrafficShape

SHAPE = TrafficShape(
    vocab=50, system_len=12, turn_len=6, output_len=4, conversations=8, max_context=96
)
EXITS = Exits(abort_waiting=0.3, abort_running=0.0, fail_running=0.0, timeout_steps=0,
              retract=False, match_ahead=8)
LOAD = Load(pattern="bursts", burst_every=20, burst_size=24, max_running=4, chunk_size=16,
            idle_sleep_s=0.0, exits=EXITS)
STATES: dict[str, Any] = {"conv_shape": (2,), "ssm_shape": (3,)}
MAMBA = partial(factories.mamba_cache, kv_size=1024, mamba_size=64, **STATES)


def drive(inject: tuple[str, ...], steps: int = 600) -> Scheduler:
    cache: Any = MAMBA(inject=inject)
    s = Scheduler(cache, Traffic.seeded(1, SHAPE), LOAD)
    for _ in range(steps):
        s.step()
    return s


def test_lost_slots_are_named_by_the_allocating_site_and_the_exit_path() -> None:
    s = drive(("mamba-abort-queued-slot",))
    ledger = s.idle_check.slots
    assert ledger is not None and ledger.lost, "the books came up short at an idle moment"
    (pool,) = ledger.lost
    assert pool["pool"] == "mamba" and pool["short"] == pool["found"] > 0
    first = pool["groups"][0]
    assert first["exit"] == "abort-waiting"
    assert first["site"].startswith("refcache/mamba.py:")
    assert any("match_waiting_req" in frame for frame in first["stack"])
    notes = [cast(NotesLine, {"type": "notes", "t": 1.0, "lost_slots": ledger.lost})]
    (finding,) = book_findings(notes)
    assert finding.kind == "books" and finding.site == first["site"]
    assert "mamba pool:" in finding.text and "abort-waiting" in finding.text


def test_a_fixed_cache_has_nothing_lost_and_the_ledger_forgets_freed_slots() -> None:
    s = drive(())
    ledger = s.idle_check.slots
    assert ledger is not None and ledger.lost == []
    cache: Any = s.cache
    # Live in the ledger = what the pool has handed out and not taken back.
    assert ledger.pools["full"].live().numel() == cache.kv_pool.used_size()
    assert ledger.pools["mamba"].live().numel() == cache.mamba_pool.used_size()


def test_a_cache_without_the_protocol_gets_no_ledger() -> None:
    class Bare:
        def pool_accounting(self) -> dict[str, Any]:
            return {}

    from scenarios.workloads.slots import SlotLedger

    assert not SlotLedger(Bare()).active
