"""A small serving scheduler around the cache protocol.

One ``step`` is one scheduler iteration: new arrivals join the queue; queued
requests are admitted while the pools allow (``alloc_request`` matches and
locks the cached prefix and allocates the rest, evicting under pressure); long
prompts are inserted chunk by chunk through ``cache_unfinished_req``; every
running request decodes a few tokens (``extend_request``); finished ones go
back through ``cache_finished_req``; ``check_hicache_events`` runs every step,
idle or not (the PP-sync leak grew even when idle). ``step`` returns the number
of cache operations it made, the unit of the harness's per-op metrics.

Whenever a step ends with no request running (SGLang's idle: requests may still
wait if nothing fits), the scheduler runs the idle check of
``scenarios.workloads.health``. It also counts what a lock or accounting leak
does to it first: failed allocations, dropped and rejected requests.

With ``Load.exits`` on, requests also leave by aborts, timeouts, failures and
retraction (``scenarios.workloads.exits``), each through the cache call SGLang
makes on that path; the counts per path are kept in ``exits``.

With ``Load.overlap`` on, decode runs as SGLang's overlap scheduler does
(``scenarios.workloads.overlap``): each step launches the next batch, whose slots
are allocated at once, then processes the previous batch's result; idle is then
also "no batch in flight". The scheduler takes the regressions of the run
(``regressions``) for the one incident whose site was SGLang's scheduler.

With ``Load.sessions`` on, some arrivals are turns of streaming sessions that
keep their memory in the cache between turns (``scenarios.workloads.sessions``).

With ``Load.speculation`` on, decode runs as EAGLE speculative decoding
(``scenarios.workloads.speculative``): each step drafts tokens, verifies them and
gives the rejected drafts' slots back.
"""

from __future__ import annotations

import random
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from refcache.regressions import validate
from refcache.req import Req
from scenarios.workloads.disagg_load import DisaggLoad
from scenarios.workloads.exits import (
    ABORT_RUNNING,
    ABORT_WAITING,
    FAIL_RUNNING,
    FINISH,
    RETRACT,
    TIMEOUT,
    Exits,
    Fate,
    Support,
    draw_fate,
)
from scenarios.workloads.health import IdleCheck
from scenarios.workloads.overlap import OverlapDecode, missing_calls
from scenarios.workloads.protocol import PrefixCache, as_bool
from scenarios.workloads.quiet import Quiet, QuietStretches
from scenarios.workloads.request_state import Running, Waiting
from scenarios.workloads.sessions import SessionDriver, Sessions
from scenarios.workloads.sessions import missing_calls as missing_session_calls
from scenarios.workloads.speculative import (
    Speculation,
    SpeculativeDecode,
    bigram_note,
    missing_call,
)
from scenarios.workloads.traffic import Traffic, draw_tokens


@dataclass(frozen=True)
class Load:
    """How requests arrive and how much runs at once."""

    pattern: str = "steady"  # steady | bursts | idle-gaps
    arrivals_per_step: float = 1.0
    burst_every: int = 50  # steps between bursts (pattern "bursts")
    burst_size: int = 24
    idle_every: int = 200  # steps per cycle of busy then idle (pattern "idle-gaps")
    idle_fraction: float = 0.5
    idle_sleep_s: float = 0.001  # wall time an idle step takes
    max_running: int = 16
    # Arrivals beyond this many waiting are rejected (counted): a cache that stops
    # admitting (a lock leak filling the pool) must not grow the harness's own queue.
    max_waiting: int = 256
    chunk_size: int = 64  # prefill chunk: longer prompts go through cache_unfinished_req
    decode_per_step: int = 4
    # A diffusion LLM (dLLM) decodes a block of this many tokens at once (0: token by
    # token): the block gets its slots, then denoise_steps steps each rewrite all of its
    # ids in place and cache the request's progress (cache_unfinished_req), as SGLang's
    # dLLM mode does; after the last step the block settles.
    dllm_block: int = 0
    denoise_steps: int = 3
    exits: Exits = field(default_factory=Exits)  # aborts, timeouts, failures, retraction
    # Launch the next decode batch before the last one's result is processed (SGLang's
    # overlap scheduling, on by default there): scenarios.workloads.overlap.
    overlap: bool = False
    # Streaming sessions: some arrivals are turns of sessions that keep their KV and
    # Mamba state between turns (scenarios.workloads.sessions).
    sessions: Sessions = field(default_factory=Sessions)
    # One side of disaggregated prefill and decode (scenarios.workloads.disagg): requests
    # pass a bootstrap and a KV transfer around the queues below; None: one engine.
    disagg: DisaggLoad | None = None
    # EAGLE speculative decoding: drafts per step, verified, rejected ones freed.
    speculation: Speculation = field(default_factory=Speculation)
    # Now and then no arrivals until nothing runs or waits, then a long stretch of event
    # rounds alone: what the books still count in transfer after it is held (quiet.py).
    quiet: Quiet = field(default_factory=Quiet)

    def __post_init__(self) -> None:
        if self.overlap and self.dllm_block:
            raise ValueError("overlap scheduling is modelled for token-by-token decode only "
                             "(dllm_block must be 0)")
        if self.sessions.on and (self.exits.on or self.overlap or self.dllm_block):
            raise ValueError("streaming sessions run on their own: without the exit load, "
                             "overlap scheduling or dLLM blocks (a retracted turn would keep "
                             "its session's memory, which this model does not follow)")
        if self.speculation.on and (self.overlap or self.dllm_block or self.sessions.on):
            raise ValueError("speculative decoding is modelled without overlap scheduling "
                             "and without dLLM blocks or sessions")

    def arrivals(self, step: int, carry: float) -> tuple[int, float]:
        """How many requests arrive at this step, and the fractional carry."""
        if self.pattern == "bursts":
            return (self.burst_size if step % self.burst_every == 0 else 0), 0.0
        if self.pattern == "idle-gaps" and self.idle(step):
            return 0, carry
        total = carry + self.arrivals_per_step
        return int(total), total - int(total)

    def idle(self, step: int) -> bool:
        busy = int(self.idle_every * (1.0 - self.idle_fraction))
        return self.pattern == "idle-gaps" and step % self.idle_every >= busy


class Scheduler:
    def __init__(self, cache: PrefixCache, traffic: Traffic, load: Load, seed: int = 0,
                 regressions: Iterable[str] = ()) -> None:
        self.cache, self.traffic, self.load = cache, traffic, load
        self.queue: deque[Waiting] = deque()
        self.running: list[Running] = []
        self.steps = 0
        self.admitted = 0  # requests alloc_request let in (re-admissions after retraction too)
        self.decoded = 0  # decode steps that committed tokens (a dLLM denoise step counts)
        self.finished = 0
        self.dropped = 0  # could not fit even with nothing else running
        self.rejected = 0  # arrived to a full queue (max_waiting)
        self.alloc_failures = 0  # alloc_request / extend_request calls that returned False
        self.idle_check = IdleCheck.for_cache(cache)
        # The request the cache calls that follow serve (None: none), set before them: the
        # slot ledger stamps the slots they allocate with it (no frame walk per allocation).
        self.serving = self.idle_check.serving
        self.exits: Counter[str] = Counter()  # requests that left by each exit path
        self.support = Support.of(cache)
        # Paths the load asks for that this cache cannot take (a missing call).
        self.skipped_exits = self.support.skipped(load.exits) if load.exits.on else {}
        # Why overlap scheduling, asked for, is not run: the cache lacks a call it needs.
        self.skipped_overlap = missing_calls(cache) if load.overlap else None
        self.overlap = (OverlapDecode(self, load.decode_per_step, validate(regressions))
                        if load.overlap and self.skipped_overlap is None else None)
        # Why speculation, asked for, is not run (a missing call), and whether the cache's
        # tree takes EAGLE's bigram keys (a note when it does not).
        spec = load.speculation
        self.skipped_speculation = missing_call(cache) if spec.on else None
        self.speculative = (SpeculativeDecode(cache, spec, seed)
                            if spec.on and self.skipped_speculation is None else None)
        self.skipped_bigrams = bigram_note(cache) if self.speculative is not None else None
        # Fates come from their own stream, so the traffic is the same with exits on or off.
        self._fates = random.Random(f"exits-{seed}")
        # Why sessions, asked for, are not run: the cache lacks a session call.
        self.skipped_sessions = missing_session_calls(cache) if load.sessions.on else None
        self.sessions = (SessionDriver(self, load.sessions, seed)
                         if load.sessions.on and self.skipped_sessions is None else None)
        self.quiet = QuietStretches(load.quiet)
        self._carry = 0.0
        self._rid = 0

    def step(self) -> int:
        self.steps += 1
        if not self.quiet.withholds():  # the load's clock stops while a quiet stretch is due
            arrivals, self._carry = self.load.arrivals(self.quiet.traffic_steps, self._carry)
            self._enqueue(arrivals)
        ops = self._leave_queue() + self._match_ahead() + self._admit() + self._decode()
        if self.sessions is not None:
            ops += self.sessions.step()
        self.serving.rid = None
        self.cache.check_hicache_events()
        busy = bool(self.running or self.queue) or self._batch_in_flight()
        self.quiet.after_round(busy, lambda: self.idle_check.held_after_quiet(self.cache))
        if not self.running:
            if not self._batch_in_flight():  # SGLang checks only once its result is processed
                live = self._live_rids() if self.idle_check.has_tables else None
                self.idle_check.run(self.cache, self._waiting_states(), live,
                                    waiting=self._waiting_reqs)
            if self.load.idle(self.steps):
                time.sleep(self.load.idle_sleep_s)
        return ops + 1

    def _enqueue(self, arrivals: int) -> None:
        exits = self.load.exits
        for _ in range(arrivals):
            request = self.traffic.next_request()  # drawn even if rejected: same trace either way
            fate = draw_fate(exits, self._fates, request.output_len) if exits.on else Fate(FINISH)
            if fate.path in self.skipped_exits:
                fate = Fate(FINISH)
            if len(self.queue) < self.load.max_waiting:
                waiting = Waiting(request, self.steps, fate)
                if self.sessions is not None:
                    self.sessions.assign(waiting)
                self.queue.append(waiting)
            else:
                self.rejected += 1

    def _new_req(self, waiting: Waiting) -> Req:
        if waiting.req is None:
            self._rid += 1
            waiting.req = Req(self._rid, [*waiting.request.prompt, *waiting.generated],
                              session_id=waiting.session)
        return waiting.req

    def _leave_queue(self) -> int:
        """Aborts and timeouts of waiting requests: ``release_aborted_request``."""
        if not self.load.exits.on:
            return 0
        timeout, ops = self.load.exits.timeout_steps, 0
        for waiting in list(self.queue):
            waited = self.steps - waiting.since
            if waiting.fate.path == ABORT_WAITING and waited >= waiting.fate.after:
                path = ABORT_WAITING
            elif timeout and waited > timeout and TIMEOUT not in self.skipped_exits:
                path = TIMEOUT
            else:
                continue
            self.queue.remove(waiting)
            req = self._new_req(waiting)
            self.serving.rid = req.rid
            self.cache.release_aborted_request(req)
            self._released_waiting(req, path)
            self.exits[path] += 1
            self._departed(req.rid, path)
            ops += 1
        return ops

    def _released_waiting(self, req: Req, path: str) -> None:
        """After ``release_aborted_request``: what else a waiting request leaving by ``path``
        gives back (PD: its metadata row, ``scenarios.workloads.disagg_prefill``); nothing here."""

    def _holds_kv_elsewhere(self) -> bool:
        """Whether KV outside the tree is held by requests not running (PD: transfers in
        flight), so a failed admission may fit later; not here."""
        return False

    def _match_ahead(self) -> int:
        """The policy's prefix match over the head of the queue, before admission."""
        if not self.load.exits.match_ahead or not self.support.match_waiting:
            return 0
        ahead = list(self.queue)[: self.load.exits.match_ahead]
        for waiting in ahead:
            req = self._new_req(waiting)
            self.serving.rid = req.rid
            self.cache.match_waiting_req(req)
        return len(ahead)

    def _departed(self, rid: int, path: str) -> None:
        """Remember how a request left, for a stale table entry's report (exit loads only:
        the happy path keeps no such record, so its memory is as it was)."""
        self.idle_check.request_event(rid, path)  # the slot ledger's exit path, if on
        if self.load.exits.on:
            self.idle_check.departed(rid, path)

    def _live_rids(self) -> set[int]:
        live = {run.req.rid for run in self.running}
        live.update(w.req.rid for w in self.queue if w.req is not None)
        return live

    def _waiting_reqs(self) -> list[Req]:
        return [w.req for w in self.queue if w.req is not None]

    def _waiting_states(self) -> int:
        """State slots waiting requests own (forked at their match): not a leak at idle."""
        return sum(1 for w in self.queue if w.req is not None and w.req.state_slot is not None)

    def _admit(self) -> int:
        ops = 0
        for waiting in list(self.queue):
            if len(self.running) >= self.load.max_running:
                break
            req = self._new_req(waiting)
            self.serving.rid = req.rid
            if not self._prefetch_done(req):
                continue  # held until its storage prefetch is done or cut short
            ops += 1
            if not self.cache.alloc_request(req):
                self.alloc_failures += 1
                self.idle_check.request_event(req.rid, "failed-schedule")
                if not self.running and not self._holds_kv_elsewhere():  # can never fit: drop
                    self.queue.remove(waiting)
                    self._drop(waiting)
                break
            self.queue.remove(waiting)
            self.admitted += 1
            if len(req.token_ids) - req.prefix_len > self.load.chunk_size:
                self.cache.cache_unfinished_req(req)
                ops += 1
            self.running.append(Running(req, waiting.request, len(waiting.request.prompt),
                                        list(waiting.generated), fate=waiting.fate))
        return ops

    def _prefetch_done(self, req: Req) -> bool:
        """SGLang's ``check_prefetch_progress``, for a cache with asynchronous prefetch."""
        check = self.support.prefetch_progress
        return check is None or as_bool("check_prefetch_progress(req)", check(req))

    def _drop(self, waiting: Waiting) -> None:
        self.dropped += 1
        if self.sessions is not None:
            self.sessions.turn_dropped(waiting)
        req = self._new_req(waiting)
        if self.load.exits.on and self.support.release_waiting:
            self.cache.release_aborted_request(req)
            self._released_waiting(req, "dropped")
            self._departed(req.rid, "dropped")

    def _batch_in_flight(self) -> bool:
        return self.overlap is not None and bool(self.overlap.in_flight)

    def _decode(self) -> int:
        if self.overlap is not None:
            return self.overlap.step()
        ops = 0
        for run in list(self.running):
            self.serving.rid = run.req.rid
            if self._leaves_running(run):
                ops += self._release(run, run.fate.path)
                continue
            ok = self._denoise(run) if self.load.dllm_block else self._next_tokens(run)
            ops += 1
            if not ok:
                ops += self._out_of_memory(run)
            elif len(run.generated) >= run.request.output_len and not run.denoise_left:
                ops += self._finish(run)
        return ops

    def _out_of_memory(self, run: Running) -> int:
        """Decode found no KV for the request: retract it (it waits again) or, without
        retraction, finish it early."""
        self.alloc_failures += 1
        if self.load.exits.retract and RETRACT not in self.skipped_exits:
            return self._release(run, RETRACT)
        return self._finish(run)

    def _leaves_running(self, run: Running) -> bool:
        return (run.fate.path in (ABORT_RUNNING, FAIL_RUNNING)
                and len(run.generated) >= run.fate.after and not run.denoise_left)

    def _release(self, run: Running, path: str) -> int:
        """A running request leaves without caching (abort, failure) or is retracted."""
        self.running.remove(run)
        run.left = path
        self.exits[path] += 1
        if path == RETRACT and self.support.retract is not None:
            # SGLang's release_req: the same request goes back, reset, and is re-admitted.
            self.support.retract(run.req, remaining=len(self.running))
            self.idle_check.request_event(run.req.rid, path)
            self.queue.appendleft(Waiting(run.request, self.steps, run.fate, req=run.req,
                                          generated=run.generated))
            return 1
        self.cache.cache_finished_req(run.req, is_insert=False)
        self._departed(run.req.rid, path)
        if self.sessions is not None:
            self.sessions.turn_left(run)
        if path == RETRACT:  # back to the queue's front with what it decoded (SGLang keeps it)
            self.queue.appendleft(Waiting(run.request, self.steps, run.fate,
                                          generated=run.generated))
        return 1

    def _draft(self, n: int) -> list[int]:
        return draw_tokens(self.traffic.rng, self.traffic.shape.vocab, n)

    def _next_tokens(self, run: Running) -> bool:
        """Autoregressive decode: a few new tokens with their slots (with speculation,
        one verify step: the drafts it accepts)."""
        left = run.request.output_len - len(run.generated)
        if left <= 0:
            return True
        if self.speculative is not None:
            drafts = self._draft(min(self.load.speculation.draft_tokens, left))
            accepted = self.speculative.verify(run.req, drafts)
            tokens, ok = accepted or [], accepted is not None
        else:
            tokens = self._draft(min(self.load.decode_per_step, left))
            ok = self.cache.extend_request(run.req, tokens)
        if ok:
            run.generated.extend(tokens)
            self.decoded += 1
        return ok

    def _denoise(self, run: Running) -> bool:
        """One dLLM step: open a block (its slots) or rewrite its ids, then cache progress."""
        block, req = self.load.dllm_block, run.req
        if not run.denoise_left:
            if len(run.generated) >= run.request.output_len:
                return True
            if not self.cache.extend_request(req, self._draft(block)):
                return False
            req.unsettled, run.denoise_left = block, self.load.denoise_steps
        else:
            req.token_ids[-block:] = self._draft(block)  # the same slots, new ids
        run.denoise_left -= 1
        self.decoded += 1
        if not run.denoise_left:
            req.unsettled = 0
            run.generated.extend(req.token_ids[-block:])
        self.cache.cache_unfinished_req(req)
        return True

    def _finish(self, run: Running) -> int:
        self.running.remove(run)
        run.left = FINISH
        self.serving.rid = run.req.rid
        self.cache.cache_finished_req(run.req)
        if self.sessions is None or not self.sessions.turn_finished(run):
            self._departed(run.req.rid, "finish")  # a session's turn leaves with its session
        self.traffic.record_reply(run.request, run.generated)
        self.finished += 1
        return 1

    def drain(self) -> None:
        """Finish everything running and give back what waiting requests own (end of run:
        the cache should be idle, as at a server's shutdown)."""
        if self.overlap is not None:
            self.overlap.drain()  # the batch in flight comes back first
        for run in list(self.running):
            self._finish(run)
        if self.sessions is not None:
            self.sessions.close_all()
        if self.load.exits.on and self.support.release_waiting:
            for waiting in self.queue:
                if waiting.req is not None:
                    self.cache.release_aborted_request(waiting.req)
                    self._released_waiting(waiting.req, "drain")
            self.queue.clear()
            self.cache.check_hicache_events()  # one more event round frees what they gave back
