"""Streaming sessions (``refcache.sessions``) on both Mamba families, and incident 11.

A session's turns continue from the KV and state its previous turn left; closing
gives everything back; an aborted turn takes the session's memory with it. With
sessions open at idle the books balance because they count ``session_held``
(SGLang #23496 found the checker passing 0 for it: a false leak every idle tick),
and ``mamba-session-close-state`` loses the state slot and ping-pong buffers of
every close.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from refcache import factories
from refcache.req import Req
from refcache.sessions import CLOSE_STATE, PING_PONG_SIZE, StreamingSession
from scenarios.workloads.health import IdleCheck

STATES: dict[str, Any] = {"conv_shape": (2,), "ssm_shape": (3,)}
FAMILIES: dict[str, Callable[..., Any]] = {
    "mamba": lambda inject=(): factories.mamba_cache(
        inject, kv_size=256, mamba_size=16, streaming_sessions=True, **STATES),
    "unified": lambda inject=(): factories.unified_cache(
        inject, kv_size=256, mamba_size=16, streaming_sessions=True, **STATES),
}
PROMPT = list(range(20))


def turn(cache: StreamingSession, rid: int, tokens: list[int], decoded: list[int],
         finish: bool = True, sid: str = "s") -> Req:
    req = Req(rid, list(tokens), session_id=sid)
    assert cache.alloc_request(req)
    cache.cache_unfinished_req(req)
    assert cache.extend_request(req, decoded)
    cache.cache_finished_req(req, is_insert=finish)
    return req


def mamba_used(cache: Any) -> int:
    return int(cache.mamba_pool.used_size())


def books(cache: Any) -> dict[str, int]:
    return {name: account.mismatch for name, account in cache.pool_accounting().items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_turn_continues_from_the_sessions_kv_and_state(family: str) -> None:
    cache = FAMILIES[family]()
    cache.open_session("s")
    turn(cache, 1, PROMPT, [50, 51])
    record = cache.sessions["s"].record
    kv_free, states = cache.kv_pool.available_size(), mamba_used(cache)
    second = Req(2, [*PROMPT, 50, 51, 60, 61, 62], session_id="s")
    assert cache.alloc_request(second)
    assert second.state_slot is record.state_slot  # the state as the last turn left it
    assert second.kv_indices[:22].equal(record.kv)  # its KV, not matched afresh
    assert cache.kv_pool.available_size() == kv_free - 3  # only the new tokens get slots
    assert mamba_used(cache) == states  # no state slot, no buffers taken
    cache.cache_finished_req(second)
    cache.sanity_check()


@pytest.mark.parametrize("family", FAMILIES)
def test_close_gives_back_kv_lock_state_and_buffers(family: str) -> None:
    cache = FAMILIES[family]()
    tree_states = mamba_used(cache)
    cache.open_session("s")
    turn(cache, 1, PROMPT, [50, 51])
    turn(cache, 2, [*PROMPT, 50, 51, 60], [70])
    held = cache.session_held()
    assert held["mamba"] == 1 + PING_PONG_SIZE and held["full"] > 0
    cache.close_session("s")
    assert cache.session_held() == {"full": 0, "mamba": 0, "swa": 0}
    assert cache.full_protected_size() == 0  # the session's prefix lock is gone
    assert mamba_used(cache) == tree_states + 1  # the prompt's state, cached in the tree
    assert not any(books(cache).values())
    cache.sanity_check()


@pytest.mark.parametrize("family", FAMILIES)
def test_an_aborted_turn_takes_the_sessions_memory_and_the_next_starts_afresh(
    family: str,
) -> None:
    cache = FAMILIES[family]()
    cache.open_session("s")
    turn(cache, 1, PROMPT, [50, 51])
    turn(cache, 2, [*PROMPT, 50, 51, 60], [70], finish=False)
    assert cache.sessions["s"].record is None and cache.session_held()["mamba"] == 0
    assert not any(books(cache).values())
    third = turn(cache, 3, [*PROMPT, 80], [81])  # admitted like a first turn: new buffers
    assert third.kv_indices.numel() == 0  # its memory went to the session
    assert cache.session_held()["mamba"] == 1 + PING_PONG_SIZE
    cache.close_session("s")
    cache.sanity_check()


@pytest.mark.parametrize("family", FAMILIES)
def test_sessions_open_at_idle_are_held_not_a_leak(family: str) -> None:
    """SGLang #23496's second finding: the checker passed 0 session-held slots, so every
    open session was a leak at every idle tick. Counted, the books balance."""
    cache = FAMILIES[family]()
    for sid in ("a", "b"):
        cache.open_session(sid)
    turn(cache, 1, PROMPT, [50], sid="a")
    turn(cache, 2, [*PROMPT[:10], 90, 91], [], sid="b")
    check = IdleCheck.for_cache(cache)
    check.run(cache)
    assert (check.mismatch, check.locked) == (0, 0)
    accounts = cache.pool_accounting()
    assert accounts["mamba"].session_held == 2 * (1 + PING_PONG_SIZE)
    uncounted = {name: dataclasses.replace(a, session_held=0).mismatch
                 for name, a in accounts.items()}
    assert uncounted["mamba"] == -2 * (1 + PING_PONG_SIZE)  # what the old checker saw
    assert uncounted["full"] < 0


@pytest.mark.parametrize("family", FAMILIES)
def test_a_close_without_free_slot_mamba_loses_the_state_and_buffers(family: str) -> None:
    cache = FAMILIES[family]((CLOSE_STATE,))
    for rid, sid in enumerate(("a", "b", "c")):
        cache.open_session(sid)
        req = Req(rid, [*PROMPT[:5], 100 + rid], session_id=sid)
        assert cache.alloc_request(req)
        cache.cache_finished_req(req)
        cache.close_session(sid)
    assert books(cache)["mamba"] == -3 * (1 + PING_PONG_SIZE)
    assert books(cache)["full"] == 0  # the KV went back: only the Mamba state is lost
