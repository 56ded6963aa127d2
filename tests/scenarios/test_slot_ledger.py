"""Slot provenance (``scenarios.workloads.slots``): the slots a pool's idle books miss,
named by the call that allocated them and the exit path their requests left by."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

import pytest

from harness.analysis.where.books import book_findings
from harness.runfiles.records import NotesLine
from refcache import factories
from scenarios.workloads import slots
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


@pytest.fixture(autouse=True)
def read_at_every_idle_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger reads the lost slots at most every READ_EVERY_S of wall time: these
    runs take less, so every short idle moment reads (the findings do not hang on speed)."""
    monkeypatch.setattr(slots, "READ_EVERY_S", 0.0)


def drive(inject: tuple[str, ...], steps: int = 600, armed: bool = False) -> Scheduler:
    cache: Any = MAMBA(inject=inject)
    s = Scheduler(cache, Traffic.seeded(1, SHAPE), LOAD)
    if armed and s.idle_check.slots is not None:
        s.idle_check.slots.arm()  # record from the first step, not the first short books
    for _ in range(steps):
        s.step()
    return s


def test_lost_slots_are_named_by_the_allocating_site_and_the_exit_path() -> None:
    s = drive(("mamba-abort-queued-slot",))
    ledger = s.idle_check.slots
    assert ledger is not None and ledger.lost, "the books came up short at an idle moment"
    (pool,) = ledger.lost
    # Armed at the first short books: the slots lost before are counted, not found.
    assert pool["pool"] == "mamba" and 0 < pool["found"] < pool["short"]
    first = pool["groups"][0]
    assert first["exit"] == "abort-waiting"
    assert first["site"].startswith("refcache/mamba.py:")
    assert any("match_waiting_req" in frame for frame in first["stack"])
    notes = [cast(NotesLine, {"type": "notes", "t": 1.0, "lost_slots": ledger.lost})]
    (finding,) = book_findings(notes)
    assert finding.kind == "books" and finding.site == first["site"]
    assert "mamba pool:" in finding.text and "abort-waiting" in finding.text


def test_armed_from_the_start_the_ledger_finds_every_lost_slot() -> None:
    s = drive(("mamba-abort-queued-slot",), armed=True)
    ledger = s.idle_check.slots
    assert ledger is not None
    (pool,) = ledger.lost
    assert pool["short"] == pool["found"] > 0
    assert sum(g["slots"] for g in pool["groups"]) == pool["found"]
    assert {g["exit"] for g in pool["groups"]} <= {"abort-waiting", "timeout"}


def test_while_the_books_balance_the_allocators_are_left_alone() -> None:
    s = drive(())
    ledger = s.idle_check.slots
    cache: Any = s.cache
    assert ledger is not None and not ledger.armed and ledger.lost == []
    assert "alloc" not in vars(cache.kv_pool) and "free" not in vars(cache.mamba_pool)


def test_a_fixed_cache_has_nothing_lost_and_the_ledger_forgets_freed_slots() -> None:
    s = drive((), armed=True)
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

    assert not slots.SlotLedger(Bare()).active


def test_books_over_the_pool_name_the_slot_ids_the_tree_holds_twice() -> None:
    """radix-dllm's injected cell (SGLang #35270: each draft of an in-flight block cached
    as its own node over the same slots): the books hold more than the pool, and the
    first line repeated the budget ('idle_pool_mismatch held 4,620 for 3+ samples')."""
    from harness.api import RunContext
    from harness.registry import load_scenario

    scenario = load_scenario("radix-dllm")
    w = scenario.build(RunContext(seed=0, inject=("radix-dllm-inflight-block",)))
    try:
        for _ in range(300):
            w.step()
        notes = w.notes()
    finally:
        with pytest.raises(AssertionError, match="kv pool"):  # its end-of-run check agrees
            w.close()
    (twice,) = [p for p in notes["lost_slots"] if "twice" in p]
    assert twice["pool"] == "full" and twice["over"] > 0 and 0 < twice["twice"] <= twice["extra"]
    line = cast(NotesLine, {"type": "notes", "t": 1.0, "lost_slots": notes["lost_slots"]})
    (finding,) = book_findings([line])
    assert finding.kind == "books" and finding.text.startswith(
        f"full pool: the idle books count {twice['over']:,} slots more than the pool has; "
        f"the tree holds {twice['twice']:,} slots under two nodes or more")
