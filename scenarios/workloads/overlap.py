"""Overlap scheduling: the next decode batch launches before the last one's result is read.

SGLang's overlap loop (``Scheduler.event_loop_overlap``) prepares and launches
decode batch N+1 before it processes batch N's result: ``prepare_for_decode``
allocates each running request's slot for the token it will produce
(``out_cache_loc``). So when a result is processed, each request in it is also
in the batch in flight, whose slot holds no committed token. Those slots are the
batch's, not the request's: ``cache_finished_req`` frees committed tokens only,
and ``process_batch_result_decode`` frees the rest:

- a request that finished at batch N was already in batch N+1; when N+1's
  result comes back, ``if self.enable_overlap and req.finished()`` frees that
  delayed slot;
- a request retracted while batch N+1 is prepared (decode out of KV:
  ``retract_decode`` -> ``release_req`` -> ``cache_finished_req(req,
  is_insert=False)``, then ``reset_for_retract`` sets ``is_retracted``) gave back
  its committed tokens; its slot in batch N, still in flight, must be freed when
  N's result comes back. v0.5.3.post3 tested ``if req.is_retracted: continue``
  before that free, so each retraction lost one slot (issue #11970: "Memory Leak
  in token_to_kv_pool_allocator"); PR #11981 (v0.5.4) frees it for ``finished()
  or is_retracted``. ``overlap-retract-inflight-slot`` takes the old path.

Here a batch in flight is a list of ``Launched`` entries (a request and the slots
its next tokens will take). The cache provides three optional calls:
``alloc_tokens(n)`` (slots for a batch, evicting first as decode does),
``free_tokens(slots)`` and ``extend_request(req, tokens, slots=...)``, which commits
tokens into slots allocated before. A cache without them runs with overlap off,
and the run's notes say why (``overlap_not_taken``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from scenarios.workloads.exits import RETRACT
from scenarios.workloads.request_state import Running
from scenarios.workloads.slots import Serving

REGRESSION = "overlap-retract-inflight-slot"  # SGLang #11981, issue #11970
CALLS = ("alloc_tokens(n)", "free_tokens(slots)", "extend_request(req, tokens, slots=...)")


def missing_calls(cache: Any) -> str | None:
    """Why overlap scheduling cannot run on ``cache`` (the calls it lacks), or None."""
    reasons = [f"the cache has no {call}" for call, name in
               (("alloc_tokens(n)", "alloc_tokens"), ("free_tokens(slots)", "free_tokens"))
               if not callable(getattr(cache, name, None))]
    if not _takes_slots(getattr(cache, "extend_request", None)):
        reasons.append("its extend_request takes no slots")
    return "; ".join(reasons) or None


def _takes_slots(method: Any) -> bool:
    try:
        return callable(method) and "slots" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


class Scheduling(Protocol):
    """The scheduler's side of overlap decode (``scheduler.Scheduler``): its running
    requests and the ways they leave. A protocol, since the scheduler imports this."""

    cache: Any
    running: list[Running]
    decoded: int
    serving: Serving  # the request the cache calls serve, for the slot ledger

    def _out_of_memory(self, run: Running) -> int: ...

    def _leaves_running(self, run: Running) -> bool: ...

    def _release(self, run: Running, path: str) -> int: ...

    def _finish(self, run: Running) -> int: ...

    def _draft(self, n: int) -> list[int]: ...


@dataclass
class Launched:
    """One request's share of a batch in flight."""

    run: Running
    slots: torch.Tensor  # out_cache_loc: one KV slot per token the batch will produce


class OverlapDecode:
    """Decode with one batch in flight: each step launches the next batch, then
    processes the result of the batch launched the step before.

    It is the scheduler's decode step when overlap is on, and it leaves through the
    scheduler's own exits (``_out_of_memory``, ``_release``, ``_finish``), so a request
    finishes, aborts or is retracted the same way with overlap on or off."""

    def __init__(self, scheduler: Scheduling, tokens_per_batch: int,
                 regressions: frozenset[str]) -> None:
        self.scheduler = scheduler
        self.cache = scheduler.cache  # has the optional calls (missing_calls said so)
        self.tokens_per_batch = tokens_per_batch  # per request (SGLang's decode: one)
        # v0.5.3.post3 skipped a retracted request before freeing its slot in flight.
        self.skips_retracted = REGRESSION in regressions
        self.in_flight: list[Launched] = []

    def step(self) -> int:
        """Launch batch N+1, then process batch N's result (SGLang's order)."""
        launched, ops = self._launch()
        ops += self._process(self.in_flight)
        self.in_flight = launched
        return ops

    def drain(self) -> int:
        """Process the batch in flight, launching nothing (the end of a run)."""
        ops = self._process(self.in_flight)
        self.in_flight = []
        return ops

    def _launch(self) -> tuple[list[Launched], int]:
        """Every running request's slots for the tokens its next batch produces.

        The batch in flight may finish a request, but its result is not known yet,
        so the request gets its slots anyway (the delayed slot). A request they do
        not fit for is retracted before the launch, as SGLang's
        ``update_running_batch`` does; its slots in flight stay in flight.
        """
        s, ops = self.scheduler, 0
        launched: list[Launched] = []
        for run in list(s.running):
            n = min(self.tokens_per_batch, run.request.output_len - len(run.generated))
            s.serving.rid = run.req.rid
            slots = self.cache.alloc_tokens(n)
            ops += 1
            if slots is None:
                ops += s._out_of_memory(run)
            else:
                launched.append(Launched(run, slots))
        return launched, ops

    def _process(self, batch: list[Launched]) -> int:
        """``process_batch_result_decode``: free the slots of requests that left since
        the launch, commit the others' tokens and finish or release them."""
        ops = 0
        for entry in batch:
            left = entry.run.left
            if left == RETRACT and self.skips_retracted:
                continue  # v0.5.3.post3: `if req.is_retracted: continue` came before the free
            if left is not None:  # finished, aborted or retracted: no token will take them
                self.cache.free_tokens(entry.slots)
                ops += 1
            else:
                ops += self._commit(entry)
        return ops

    def _commit(self, entry: Launched) -> int:
        """The request's new tokens take the batch's slots; past its end they are freed."""
        s, run = self.scheduler, entry.run
        s.serving.rid = run.req.rid
        if s._leaves_running(run):  # aborted or failed: its result is dropped
            self.cache.free_tokens(entry.slots)
            return 1 + s._release(run, run.fate.path)
        n = min(len(entry.slots), run.request.output_len - len(run.generated))
        tokens = s._draft(n)
        self.cache.extend_request(run.req, tokens, slots=entry.slots[:n])
        run.generated.extend(tokens)
        if n:
            s.decoded += 1
        ops = 1
        if n < len(entry.slots):  # launched before the last batch's result ended the request
            self.cache.free_tokens(entry.slots[n:])
            ops += 1
        if len(run.generated) >= run.request.output_len:
            ops += s._finish(run)
        return ops
