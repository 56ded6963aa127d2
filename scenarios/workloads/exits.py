"""Every way a request leaves other than by finishing, and the cache calls each one makes.

A serving scheduler aborts queued requests (the client went away, the request
waited past its timeout), aborts or fails running ones (a disconnect
mid-stream, an error in its forward pass) and retracts running requests when
decode runs out of KV (their memory goes back, they wait again and are
re-admitted through ``match_prefix``). Each path must give back what the
request holds; most prefix-cache leaks SGLang shipped since 2025 were one of
these paths forgetting one thing. The calls are SGLang's:

- ``release_aborted_request(req)``: a waiting request leaves; whatever it took
  while waiting (a forked state slot, a storage prefetch) goes back.
- ``cache_finished_req(req, is_insert=False)``: a running request leaves
  without caching its tokens (abort, failure, retraction); its own KV and
  state slots go back and its lock is released.
- ``match_waiting_req(req)``: the scheduling policy matches a waiting
  request's prefix before admitting it (SGLang's prefix-match pass over the
  queue); a Mamba cache forks the matched state into a slot the request owns.

All three are optional for a user's cache: a path whose call is missing is
not taken, and the workload's notes say which and why.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FINISH = "finish"
ABORT_WAITING = "abort-waiting"
TIMEOUT = "timeout"
ABORT_RUNNING = "abort-running"
FAIL_RUNNING = "fail-running"
RETRACT = "retract"
PATHS = (ABORT_WAITING, TIMEOUT, ABORT_RUNNING, FAIL_RUNNING, RETRACT)


@dataclass(frozen=True)
class Exits:
    """How often each exit path is taken. All off by default: the happy path only.

    Rates are the share of arriving requests that leave by that path. They are
    chosen so that each path is taken many times a second in a short run, not
    measured from a public endpoint (no such figures are published).
    """

    abort_waiting: float = 0.0  # the client goes away while the request waits
    abort_running: float = 0.0  # the client goes away mid-stream
    fail_running: float = 0.0  # the request fails halfway (an error in its forward pass)
    timeout_steps: int = 0  # a request waiting longer is aborted (0: no timeout)
    retract: bool = False  # decode out of KV retracts the request instead of ending it
    match_ahead: int = 0  # waiting requests matched before admission each step

    @property
    def on(self) -> bool:
        return bool(self.abort_waiting or self.abort_running or self.fail_running
                    or self.timeout_steps or self.retract or self.match_ahead)


@dataclass(frozen=True)
class Fate:
    """How one request will leave: the path, and after how many steps or tokens."""

    path: str
    after: int = 0


def draw_fate(exits: Exits, rng: random.Random, output_len: int) -> Fate:
    """The exit path of one arriving request (its own random stream, not the traffic's)."""
    u = rng.random()
    for path, rate in ((ABORT_WAITING, exits.abort_waiting),
                       (ABORT_RUNNING, exits.abort_running),
                       (FAIL_RUNNING, exits.fail_running)):
        if u < rate:
            limit = 3 if path == ABORT_WAITING else max(0, output_len - 1)
            return Fate(path, rng.randint(0, limit))
        u -= rate
    return Fate(FINISH)


@dataclass(frozen=True)
class Support:
    """Which exit calls a cache implements (``Support.of(cache)``)."""

    release_waiting: bool
    release_running: bool
    match_waiting: bool
    # SGLang's check_prefetch_progress(req) -> bool, for caches with asynchronous prefetch.
    prefetch_progress: Callable[[Any], Any] | None = None
    # retract_request(req, remaining=n): the request is re-queued as it is (SGLang's
    # release_req); without it, cache_finished_req(is_insert=False) and a new request.
    retract: Callable[..., Any] | None = None

    @classmethod
    def of(cls, cache: Any) -> Support:
        progress = getattr(cache, "check_prefetch_progress", None)
        retract = getattr(cache, "retract_request", None)
        return cls(release_waiting=callable(getattr(cache, "release_aborted_request", None)),
                   release_running=_takes(getattr(cache, "cache_finished_req", None), "is_insert"),
                   match_waiting=callable(getattr(cache, "match_waiting_req", None)),
                   prefetch_progress=progress if callable(progress) else None,
                   retract=retract if callable(retract) else None)

    def skipped(self, exits: Exits) -> dict[str, str]:
        """Exit paths the load asks for that this cache cannot take, with the reason."""
        missing: dict[str, str] = {}
        if not self.release_waiting:
            reason = "the cache has no release_aborted_request(req)"
            if exits.abort_waiting:
                missing[ABORT_WAITING] = reason
            if exits.timeout_steps:
                missing[TIMEOUT] = reason
        if not self.release_running:
            reason = "the cache's cache_finished_req takes no is_insert"
            for path, on in ((ABORT_RUNNING, exits.abort_running),
                             (FAIL_RUNNING, exits.fail_running), (RETRACT, exits.retract)):
                if on:
                    missing[path] = reason
        if exits.match_ahead and not self.match_waiting:
            missing["match-waiting"] = "the cache has no match_waiting_req(req)"
        return missing


def _takes(method: Any, name: str) -> bool:
    if not callable(method):
        return False
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
