"""The scheduler's streaming sessions (``scenarios.workloads.sessions``) in-process.

The injected run's slot ledger names the turns' Mamba allocations as left by
``session-close``; a cache without session calls runs the same load without
sessions and its notes say why; the session load refuses the loads it does not model.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.api import RunContext
from harness.registry import load_scenario
from refcache.sessions import CLOSE_STATE
from scenarios.workloads.exits import Exits
from scenarios.workloads.scheduler import Load
from scenarios.workloads.sessions import SESSION_CLOSE, Sessions

TINY: dict[str, Any] = {"load": {"max_running": 8}}


@pytest.mark.integration
def test_a_close_that_keeps_the_state_is_named_by_the_slot_ledger() -> None:
    # Short sessions that close soon after their last turn: many closes in a few hundred steps.
    quick = Sessions(share=0.4, max_open=8, turns=(1, 3), abort_turn=0.1, linger_steps=5)
    options = {"load": {"max_running": 8, "sessions": quick}}
    w = load_scenario("mamba-sessions").build(
        RunContext(seed=1, inject=(CLOSE_STATE,), options=options))
    # Recording from the start: every lost slot is found at the first short idle moment
    # (armed there, the ledger finds only those lost after, and rereads at most every 0.5 s).
    w.scheduler.idle_check.slots.arm()
    try:
        for _ in range(500):
            w.step()
        lost = w.notes()["lost_slots"]
    finally:
        w.cache.close()  # not w.close(): its end-of-run check would fail on the lost slots
    assert lost[0]["pool"] == "mamba" and lost[0]["short"] > 0
    groups = lost[0]["groups"]
    assert {g["exit"] for g in groups} == {SESSION_CLOSE}
    assert "_alloc_ping_pong" in groups[0]["site"]  # two buffers per close, then the state


@pytest.mark.integration
def test_a_cache_without_sessions_runs_the_load_without_them_and_says_so() -> None:
    options = {**TINY, "cache": {"streaming_sessions": False}}
    w = load_scenario("mamba-sessions").build(RunContext(seed=1, options=options))
    try:
        for _ in range(300):
            w.step()
        notes = w.notes()
    finally:
        w.close()
    assert w.scheduler.sessions is None and w.scheduler.finished > 0
    assert "open_session" in notes["sessions_not_taken"]
    assert "sessions_closed" not in notes["expects"]


def test_sessions_refuse_the_loads_they_do_not_model() -> None:
    with pytest.raises(ValueError, match="streaming sessions"):
        Load(sessions=Sessions(share=0.1), exits=Exits(retract=True))
    with pytest.raises(ValueError, match="streaming sessions"):
        Load(sessions=Sessions(share=0.1), overlap=True)
