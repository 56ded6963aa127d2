"""Streaming sessions on the scheduler's side: open, turns, turn aborts, close.

A client opens a session, sends turns one at a time (each turn's prompt is the
session's tokens so far plus a new user message, and it carries the session's id,
``Req.session_id``), and closes the session some steps after its last turn. The
cache keeps the session's KV and Mamba state between turns, so open sessions hold
memory at idle that is neither free nor in the tree: the idle books count it as
``session_held`` (``refcache.pools.PoolAccount``), which is what the idle-gap
scenarios check while sessions stay open through the gaps.

The calls (optional in the protocol, ``scenarios.workloads.protocol``):
``open_session(session_id)``, ``close_session(session_id)`` and the turn's
``req.session_id``; a turn aborted mid-stream leaves through
``cache_finished_req(req, is_insert=False)`` like any aborted request. A cache
without the first two runs the load without sessions (every arrival a plain
request) and the run's notes say so (``sessions_not_taken``).

The slot ledger (``scenarios.workloads.slots``) gives a lost slot the first thing
that happened to its request after the allocation. A session's memory outlives
the turns that allocated it, so a finished turn's departure is told when its
session closes (``session-close``), not when the turn ends: slots a close forgets
show as allocated by those turns and left by ``session-close``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from refcache.req import Req
from scenarios.workloads.exits import ABORT_RUNNING, Fate, Support
from scenarios.workloads.health import IdleCheck
from scenarios.workloads.request_state import Running, Waiting
from scenarios.workloads.slots import Serving
from scenarios.workloads.traffic import Request, Traffic, draw_tokens


class Scheduling(Protocol):
    """What the session driver reads of its scheduler (``scheduler.Scheduler``). A
    protocol, since the scheduler imports this module."""

    cache: Any
    traffic: Traffic
    steps: int
    serving: Serving  # the request the cache calls serve, for the slot ledger
    idle_check: IdleCheck

SESSION_CLOSE = "session-close"  # the exit path of a finished turn's memory
CALLS = ("open_session", "close_session")


@dataclass(frozen=True)
class Sessions:
    """How streaming sessions run. Off by default (``share`` 0)."""

    share: float = 0.0  # of arriving requests, the share that is a session's turn
    max_open: int = 8  # sessions open at once
    open_new: float = 0.5  # below max_open, the chance a turn opens a new session
    turns: tuple[int, int] = (2, 6)  # turns per session, drawn uniformly
    turn_len: float = 24.0  # median tokens of a turn's new user message
    abort_turn: float = 0.0  # of turns, the share aborted mid-stream
    linger_steps: int = 40  # a session closes up to this many steps after its last turn
    max_tokens: int = 512  # a session this long takes no more turns

    @property
    def on(self) -> bool:
        return self.share > 0


@dataclass
class _Open:
    """One open session as the client sees it."""

    sid: int
    turns_left: int
    history: list[int] | None = None  # its tokens after the last finished turn
    in_flight: bool = False  # a turn waits or runs
    close_at: int | None = None  # the step it closes at (after its last turn)
    turn_rids: list[int] = field(default_factory=list)  # turns whose memory it keeps


def missing_calls(cache: Any) -> str | None:
    """Why sessions are not run on ``cache`` (a call it lacks), or None."""
    missing = [name for name in CALLS if not callable(getattr(cache, name, None))]
    if missing:
        return f"the cache has no {' or '.join(f'{m}(session_id)' for m in missing)}"
    return None


class SessionDriver:
    """The sessions of one scheduler: which arrivals are turns, and when sessions close."""

    def __init__(self, scheduler: Scheduling, config: Sessions, seed: int) -> None:
        self.s, self.config = scheduler, config
        # Their own stream: the traffic is the same with sessions on or off.
        self.rng = random.Random(f"sessions-{seed}")
        self.open: dict[int, _Open] = {}
        self.can_abort = Support.of(scheduler.cache).release_running
        self.opened = self.closed = self.turns = self.continued = self.aborted = 0
        self._ids = 0

    # ------------------------------------------------------------------ arrivals
    def assign(self, waiting: Waiting) -> None:
        """Maybe make this arrival a session's turn (a new session's first, or the next)."""
        if self.rng.random() >= self.config.share:
            return
        ready = [o for o in self.open.values() if not o.in_flight and o.turns_left > 0]
        room = len(self.open) < self.config.max_open
        if ready and not (room and self.rng.random() < self.config.open_new):
            session = self.rng.choice(ready)
            if session.history is not None:  # else its first turn never ran: a first turn
                prompt = session.history + self._tokens()
                waiting.request = Request(prompt, waiting.request.output_len)
        elif room:
            session = self._open_one()
        else:
            return
        session.in_flight, session.close_at = True, None
        session.turns_left -= 1
        waiting.session = session.sid
        self.turns += 1
        if self.can_abort and self.rng.random() < self.config.abort_turn:
            waiting.fate = Fate(ABORT_RUNNING, self.rng.randint(0, waiting.request.output_len - 1))

    def _open_one(self) -> _Open:
        self._ids += 1
        self.s.serving.rid = None
        self.s.cache.open_session(self._ids)
        session = _Open(self._ids, self.rng.randint(*self.config.turns))
        self.open[session.sid] = session
        self.opened += 1
        return session

    def _tokens(self) -> list[int]:
        n = max(1, round(self.rng.lognormvariate(math.log(self.config.turn_len), 0.6)))
        return draw_tokens(self.rng, self.s.traffic.shape.vocab, n)

    # ------------------------------------------------------------------ turns
    def turn_finished(self, run: Running) -> bool:
        """A turn finished: its session keeps its memory (True: the turn's departure is
        told when the session closes)."""
        session = self._session(run.req)
        if session is None:
            return False
        if session.history is not None:
            self.continued += 1  # it ran on the session's kept memory
        session.history = list(run.req.token_ids)
        session.turn_rids.append(run.req.rid)
        if len(session.history) >= self.config.max_tokens:
            session.turns_left = 0
        self._turn_over(session)
        return True

    def turn_left(self, run: Running) -> None:
        """A turn was aborted: the session's kept memory went with it."""
        session = self._session(run.req)
        if session is None:
            return
        self.aborted += 1
        self._departed_turns(session, run.left or ABORT_RUNNING)
        self._turn_over(session)

    def turn_dropped(self, waiting: Waiting) -> None:
        """A turn never ran (it could not fit): the session waits for the next one."""
        session = self.open.get(waiting.session) if waiting.session is not None else None
        if session is not None:
            self._turn_over(session)

    def _session(self, req: Req) -> _Open | None:
        return self.open.get(req.session_id) if req.session_id is not None else None

    def _turn_over(self, session: _Open) -> None:
        session.in_flight = False
        if session.turns_left <= 0 and session.close_at is None:
            session.close_at = self.s.steps + self.rng.randint(0, self.config.linger_steps)

    # ------------------------------------------------------------------ closing
    def step(self) -> int:
        """Close the sessions whose client is done; returns the cache calls made."""
        due = [o for o in self.open.values()
               if not o.in_flight and o.close_at is not None and o.close_at <= self.s.steps]
        for session in due:
            self._close(session)
        return len(due)

    def close_all(self) -> None:
        """End of run: every session closes (its turn, if one waits, runs without it)."""
        for session in list(self.open.values()):
            self._close(session)

    def _close(self, session: _Open) -> None:
        del self.open[session.sid]
        self.s.serving.rid = None
        self.s.cache.close_session(session.sid)
        self._departed_turns(session, SESSION_CLOSE)
        self.closed += 1

    def _departed_turns(self, session: _Open, path: str) -> None:
        """The turns whose memory the session kept left now, by ``path``."""
        for rid in session.turn_rids:
            self.s.idle_check.request_event(rid, path)
        session.turn_rids.clear()
