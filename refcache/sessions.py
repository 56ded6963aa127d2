"""Streaming sessions: multi-turn requests that keep their KV and Mamba state between turns.

SGLang's ``StreamingSession`` (``sglang/srt/session/streaming_session.py``; in
0.5.17 a wrapper of any cache, in 0.5.23 owned by ``UnifiedRadixCache``). A
session's first turn is admitted like any request, plus the Mamba ping-pong
track buffers (``ping_pong_size`` state slots, SGLang's extra-buffer mode); the
session then owns that turn's memory: its KV slots past the tree's prefix, the
lock on that prefix, its Mamba state slot and the buffers. When the turn
finishes the session keeps them (its *record*); the next turn borrows the
record and continues from it (the previous KV and the state as they are, no
match, no copy-on-write), allocating only its new tokens. A turn publishes
nothing of its own into the tree except the first prompt (its chunked prefill).

An aborted turn gives the record back to the request, which releases it like
any aborted request (the buffers too); the session stays open and its next turn
starts afresh. Closing the session (``release_session``) unlocks the prefix,
frees the record's KV, then frees the Mamba state slot and the buffers
(``_free_slot_mamba``). SGLang has a per-request row pool (``req_to_token``)
that the record also holds; refcache keeps a request's row as its
``kv_indices`` tensor, so there is no such pool to give back here.

Incident 11 (SGLang #23496) lives in ``close_session``: under
``mamba-session-close-state`` the close frees the KV and unlocks but never
calls ``_free_slot_mamba``, as ``streaming_session.py`` did after the rename
from ``session_aware_cache.py`` dropped the call: ``1 + ping_pong_size`` Mamba
slots lost per close until the pool starves.

While a session is open at idle its record is neither free nor in the tree:
the books count it as ``session_held`` (SGLang's checker adds it:
``available + evictable + protected + session_held == size``), its prefix lock
as ``session_locked``, and ``held_slots()`` names its slot ids, so an open
session is held memory, not a leak.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from refcache.mamba import MambaRadixCache
from refcache.pools import PoolAccount, StatePool
from refcache.radix import RadixCache
from refcache.req import Req
from refcache.unified import UnifiedRadixCache

CLOSE_STATE = "mamba-session-close-state"
PING_PONG_SIZE = 2  # SGLang's mamba_ping_pong_track_buffer_size in extra-buffer mode
_NONE = torch.empty(0, dtype=torch.int64)


@dataclass(eq=False)
class Record:
    """A finished turn's memory, kept by its session for the next turn."""

    tokens: list[int]
    kv: torch.Tensor  # the KV slot of every token; the first prefix_len are the tree's
    prefix_len: int
    last_node: Any  # locked: the tree prefix stays while the session lives
    state_slot: torch.Tensor | None
    swa: torch.Tensor | None  # the record's own SWA slots (a Unified cache with SWA)

    @classmethod
    def detach(cls, req: Req) -> Record:
        """Take the request's memory; the request holds nothing after."""
        record = cls(list(req.token_ids), req.kv_indices, req.prefix_len, req.last_node,
                     req.state_slot, req.aux.pop("swa_indices", None))
        req.kv_indices, req.prefix_len, req.last_node, req.state_slot = _NONE, 0, None, None
        return record

    def lend(self, req: Req) -> None:
        """Give the record to the request (its tokens become the request's first ones)."""
        req.token_ids = list(self.tokens)
        req.kv_indices, req.prefix_len, req.last_node = self.kv, self.prefix_len, self.last_node
        req.state_slot = self.state_slot
        if self.swa is not None:
            req.aux["swa_indices"] = self.swa


@dataclass(eq=False)
class SessionSlot:
    """One open session: its record between turns, the turn borrowing it, its buffers."""

    record: Record | None = None
    borrower: Req | None = None  # the turn running on the session's memory
    ping_pong: torch.Tensor | None = None  # Mamba track buffers, owned from the first turn
    published: bool = False  # the first prompt is in the tree: later turns publish nothing


class StreamingSession(RadixCache):
    """Sessions for a cache with a Mamba state (mixed in before the cache's class)."""

    ping_pong_size = PING_PONG_SIZE

    def reset(self) -> None:
        super().reset()
        self.sessions: dict[Any, SessionSlot] = {}

    # ------------------------------------------------------------------ lifecycle
    def open_session(self, session_id: Any) -> None:
        if session_id in self.sessions:
            raise ValueError(f"session {session_id!r} is already open")
        self.sessions[session_id] = SessionSlot()

    def close_session(self, session_id: Any) -> None:
        """SGLang's ``release_session``: unlock, free the record's KV, then its Mamba state."""
        slot = self.sessions.get(session_id)
        if slot is None:
            return
        if slot.borrower is not None:
            raise ValueError(f"session {session_id!r} closed while turn "
                             f"{slot.borrower.rid} runs on it")
        del self.sessions[session_id]
        state = None
        if slot.record is not None:
            scratch = Req(-1, [])
            slot.record.lend(scratch)
            state, scratch.state_slot = scratch.state_slot, None
            self.release_running_req(scratch)  # its KV past the prefix, SWA, the lock
        # SGLang #23496: the renamed streaming_session.py never called _free_slot_mamba.
        if CLOSE_STATE not in self.inject:
            self._free_slot_mamba(state, slot)

    def _free_slot_mamba(self, state: torch.Tensor | None, slot: SessionSlot) -> None:
        pool = self._state_pool()
        if pool is None:
            return
        if state is not None:
            pool.free(state)
        if slot.ping_pong is not None:
            pool.free(slot.ping_pong)
            slot.ping_pong = None

    # ------------------------------------------------------------------ turns
    def _slot_of(self, req: Req) -> SessionSlot | None:
        return None if req.session_id is None else self.sessions.get(req.session_id)

    def alloc_request(self, req: Req) -> bool:
        slot = self._slot_of(req)
        if slot is None:
            return super().alloc_request(req)
        if slot.borrower is not None:
            raise ValueError(f"session {req.session_id!r} already runs turn {slot.borrower.rid}")
        ok = self._borrow(req, slot) if slot.record is not None else self._first_turn(req, slot)
        if ok:
            slot.borrower = req
        return ok

    def _first_turn(self, req: Req, slot: SessionSlot) -> bool:
        """Admitted like any request, plus the track buffers the session will own."""
        buffers = self._alloc_ping_pong()
        if buffers is None:
            return False
        if not super().alloc_request(req):
            self._free_buffers(buffers)
            return False
        slot.ping_pong = buffers
        return True

    def _borrow(self, req: Req, slot: SessionSlot) -> bool:
        """Continue from the record: only the new tokens get slots; False leaves the
        record with the session (the turn waits and borrows it again)."""
        record = slot.record
        assert record is not None
        n = len(record.tokens)
        if req.token_ids[:n] != record.tokens:
            raise AssertionError(f"session {req.session_id!r}: turn {req.rid} does not extend "
                                 "the session's tokens (streaming sessions are append-only)")
        prompt, new = list(req.token_ids), req.token_ids[n:]
        record.lend(req)
        if not self.extend_request(req, new):
            req.token_ids, req.kv_indices, req.prefix_len = prompt, _NONE, 0
            req.last_node = req.state_slot = None
            req.aux.pop("swa_indices", None)
            return False
        slot.record = None
        return True

    def cache_unfinished_req(self, req: Req) -> None:
        """A turn publishes nothing of its own, except the session's first prompt."""
        slot = self._slot_of(req)
        if slot is not None and slot.borrower is req and slot.published:
            return
        super().cache_unfinished_req(req)

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """A finished turn's memory stays with the session; an aborted turn's goes back
        with the request (the session's next turn starts afresh)."""
        slot = self._slot_of(req)
        if slot is None or slot.borrower is not req:
            super().cache_finished_req(req, is_insert)
            return
        slot.borrower = None
        if is_insert:
            slot.record, slot.published = Record.detach(req), True
            return
        if slot.ping_pong is not None:
            self._free_buffers(slot.ping_pong)
        slot.ping_pong, slot.published = None, False
        super().cache_finished_req(req, is_insert=False)

    # ------------------------------------------------------------------ the Mamba pool
    def _state_pool(self) -> StatePool | None:
        pool = getattr(self, "mamba_pool", None)
        return pool if isinstance(pool, StatePool) else None

    def _alloc_ping_pong(self) -> torch.Tensor | None:
        pool = self._state_pool()
        if pool is None or not self.ping_pong_size:
            return _NONE
        short = self.ping_pong_size - pool.available_size()
        if short > 0:
            self.evict(0, mamba_num=short)
        return pool.alloc(self.ping_pong_size)

    def _free_buffers(self, buffers: torch.Tensor) -> None:
        pool = self._state_pool()
        if pool is not None and buffers.numel():
            pool.free(buffers)

    # ------------------------------------------------------------------ books
    def session_held(self) -> dict[str, int]:
        """Slots open sessions hold outside the tree, per pool (SGLang's session_held_*)."""
        held = {"full": 0, "mamba": 0, "swa": 0}
        for name, ids in self._session_ids().items():
            held[name] = sum(int(t.numel()) for t in ids)
        return held

    def _session_ids(self) -> dict[str, list[torch.Tensor]]:
        ids: dict[str, list[torch.Tensor]] = {"full": [], "mamba": [], "swa": []}
        for slot in self.sessions.values():
            if slot.ping_pong is not None:
                ids["mamba"].append(slot.ping_pong)
            record = slot.record
            if record is None:
                continue
            ids["full"].append(record.kv[record.prefix_len:])
            if record.state_slot is not None:
                ids["mamba"].append(record.state_slot.reshape(-1))
            if record.swa is not None:
                ids["swa"].append(record.swa)
        return ids

    def session_locked(self) -> int:
        """KV tokens on the prefixes open sessions lock (each node counted once)."""
        seen: dict[int, int] = {}
        for slot in self.sessions.values():
            node = slot.record.last_node if slot.record is not None else None
            while node is not None and node is not self.root_node and node.id not in seen:
                seen[node.id] = len(node.value)
                node = node.parent
        return sum(seen.values())

    def pool_accounting(self) -> dict[str, PoolAccount]:
        books = super().pool_accounting()
        held = self.session_held()
        for name, account in books.items():
            books[name] = dataclasses.replace(account, session_held=held.get(name, 0))
        if "full" in books:
            books["full"] = dataclasses.replace(books["full"], session_locked=self.session_locked())
        return books

    def held_slots(self) -> dict[str, torch.Tensor]:
        """The tree's slot ids and the open sessions' (held, not lost)."""
        held = super().held_slots()
        for name, ids in self._session_ids().items():
            if name in held and ids:
                held[name] = torch.cat([held[name], *ids])
        return held

    def stats(self) -> dict[str, float]:
        records = sum(1 for s in self.sessions.values() if s.record is not None)
        return {**super().stats(), "sessions_open": len(self.sessions),
                "session_records": records}


class SessionMambaRadixCache(StreamingSession, MambaRadixCache):
    """MambaRadixCache with streaming sessions (0.5.17's wrapper around it)."""

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        held = self.session_held()
        super().sanity_check(outstanding_kv + held["full"], outstanding_states + held["mamba"])


class SessionUnifiedRadixCache(StreamingSession, UnifiedRadixCache):
    """UnifiedRadixCache with streaming sessions (0.5.23's ``self.session``)."""

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0,
                     held: Any = None) -> None:
        own = self.session_held()
        if held is None and outstanding_states:  # a sum over the components: add ours to it
            states = outstanding_states + sum(own[c.name] for c in self.comps)
            super().sanity_check(outstanding_kv + own["full"], states)
            return
        per_pool = {c.name: own[c.name] + int((held or {}).get(c.name, 0)) for c in self.comps}
        super().sanity_check(outstanding_kv + own["full"], held=per_pool)

