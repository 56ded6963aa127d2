"""Disaggregated prefill and decode (PD): the queues SGLang keeps around each side's cache.

A prefill engine computes a prompt's KV and hands it to a decode engine. Each
request first passes a bootstrap (the two engines agree on where the KV goes),
then a transfer; a fake transfer backend (SGLang's ``fake`` backend, which
answers every poll at once, given a latency and failures here) answers the
polls with SGLang's ``KVPoll`` states. One side runs per scenario, its cache
under test, the peer only as the backend's answers.

Prefill side (SGLang's ``disaggregation/prefill.py``, the server with HiCache):
a request's storage prefetch starts as it enters the bootstrap queue
(``_prefetch_kvcache``: ``match_waiting_req``); ``pop_bootstrapped`` takes a
metadata row for each bootstrapped request (``alloc_metadata_buffer``) and moves it
to the waiting queue, or, on ``KVPoll.Failed`` (a failed bootstrap, or an abort in
the bootstrap queue: the sender's ``abort()`` fails the next poll), gives back its
prefetch (``release_aborted_request``). Admission and the prefill forward are the
scheduler's; the request then waits in the inflight queue for its transfer, and on
success or failure alike releases its KV into the tree (``cache_finished_req``) and
its metadata row. A waiting request aborted or timed out gives back its prefetch and
its metadata row (``abort_request``: ``release_req_to_metadata_buffer``).

Decode side (``disaggregation/decode.py``): a request waits in the prealloc queue
for its handshake (``KVPoll.Failed``: it leaves holding nothing); once bootstrapped,
``pop_preallocated`` gives it a request row (``alloc_req_slot``), a metadata row and
its KV (``alloc_request``: the radix match, lock and allocation of ``_pre_alloc``), in
order, stopping the pass at the first that does not fit, and sends the metadata. In
the transfer queue, ``pop_transferred`` gives the metadata row back when the transfer
ends; on failure (or an abort there) it releases the KV without caching it
(``cache_finished_req(req, is_insert=False)``) and the request row. A transferred
request waits, then runs as a prebuilt batch (no allocation at admission); an abort in
the waiting queue releases its KV into the tree (``release_kv_cache``) and its row.

The scheduler's idle check runs when no request runs and no KV is held outside the
tree by a queue (prefill: no transfer in flight; decode: none in transfer or waiting).

Here: what both sides share (the handoff, the fake backend, the queues' base
scheduler, the PD gauges). The sides: ``disagg_prefill.PrefillScheduler`` and
``disagg_decode.DecodeScheduler``; ``disagg_sides.make_scheduler`` picks one.
Incidents whose site is the prefill side's scheduler (``Regression.cache ==
"Scheduler"``): ``pd-abort-waiting-metadata`` (SGLang #17483) and
``pd-bootstrap-failure-prefetch`` (SGLang #15439).
"""

from __future__ import annotations

import abc
import functools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from refcache.regressions import validate
from refcache.req import Req
from scenarios.workloads.disagg_load import (
    ABORT_BOOTSTRAP,
    ABORT_TRANSFER,
    BOOTSTRAP_FAILURE,
    DECODE,
    PD_PATHS,
    TRANSFER_FAILURE,
    DisaggLoad,
)
from scenarios.workloads.exits import FINISH, Fate, draw_fate
from scenarios.workloads.protocol import PrefixCache
from scenarios.workloads.request_state import Running, Waiting
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic

# SGLang's KVPoll states (disaggregation/base/conn.py).
FAILED, BOOTSTRAPPING, WAITING_FOR_INPUT, TRANSFERRING, SUCCESS = range(5)

ABORT_WAITING_METADATA = "pd-abort-waiting-metadata"  # SGLang #17483
BOOTSTRAP_FAILURE_PREFETCH = "pd-bootstrap-failure-prefetch"  # SGLang #15439

METADATA_CALLS = ("alloc_metadata_buffer", "free_metadata_buffer")
REQ_SLOT_CALLS = ("alloc_req_slot", "free_req_slot")
# An abort in the bootstrap (transfer) queue makes the peer's next poll fail (the
# sender's or receiver's abort()): the request leaves through the failure branch, which
# is what a stale entry's report names; the exit counters keep the two apart.
BRANCH = {ABORT_BOOTSTRAP: BOOTSTRAP_FAILURE, ABORT_TRANSFER: TRANSFER_FAILURE}
PATH_WORDS = {
    ABORT_BOOTSTRAP: "requests aborted in the bootstrap (prefill) or prealloc (decode) queue",
    BOOTSTRAP_FAILURE: "requests whose bootstrap failed",
    ABORT_TRANSFER: "requests aborted while their KV was in transfer",
    TRANSFER_FAILURE: "requests whose KV transfer failed",
}


@dataclass
class Handoff:
    """One request between the engines: its PD fate and the backend's progress."""

    waiting: Waiting
    req: Req
    path: str | None  # the PD exit it is fated to (None: bootstrap and transfer succeed)
    after: int = 0  # polls before an abort (the abort paths)
    bootstrap_polls: int = 0
    transfer_polls: int = 0
    run: Running | None = None  # prefill: the request whose forward is done


class FakeBackend:
    """SGLang's fake transfer backend with a latency and the fated failures."""

    def __init__(self, load: DisaggLoad) -> None:
        self.load = load

    def bootstrap(self, h: Handoff) -> int:
        h.bootstrap_polls += 1
        if h.path == ABORT_BOOTSTRAP and h.bootstrap_polls > h.after:
            return FAILED  # the sender's (receiver's) abort(): its next poll fails
        if h.bootstrap_polls < self.load.bootstrap_steps:
            return BOOTSTRAPPING
        return FAILED if h.path == BOOTSTRAP_FAILURE else WAITING_FOR_INPUT

    def transfer(self, h: Handoff) -> int:
        h.transfer_polls += 1
        if h.path == ABORT_TRANSFER and h.transfer_polls > h.after:
            return FAILED
        if h.transfer_polls < self.load.transfer_steps:
            return TRANSFERRING
        return FAILED if h.path == TRANSFER_FAILURE else SUCCESS


def missing_calls(cache: object, load: Load) -> str | None:
    """Why a PD load runs as one engine on this cache (a PD call it lacks), or None."""
    if load.disagg is None:
        return None
    calls = METADATA_CALLS + (REQ_SLOT_CALLS if load.disagg.side == DECODE else ())
    missing = [f"{name}(req)" for name in calls if not callable(getattr(cache, name, None))]
    if not missing:
        return None
    return (f"the cache has no {', '.join(missing)}: the {load.disagg.side} side's bootstrap "
            f"and transfer queues and their exits ({', '.join(PD_PATHS)}) are not run; "
            "requests are served as by one engine")


class DisaggScheduler(Scheduler, metaclass=abc.ABCMeta):
    """What both sides share: the bootstrap and transfer queues, the fated PD exits. Each
    side moves its own queues (``_pd_step``); a side missing it fails at construction."""

    def __init__(self, cache: PrefixCache, traffic: Traffic, load: Load, seed: int = 0,
                 regressions: Iterable[str] = ()) -> None:
        super().__init__(cache, traffic, load, seed, regressions)
        assert load.disagg is not None
        self.pd = load.disagg
        self.inject = validate(regressions)
        self.backend = FakeBackend(self.pd)
        self.bootstrapping: list[Handoff] = []  # prefill: bootstrap queue; decode: prealloc
        self.transferring: list[Handoff] = []  # prefill: inflight queue; decode: transfer
        self.handoffs: dict[int, Handoff] = {}  # rid -> its handoff, while it is served
        self._pd_fates = random.Random(f"pd-{seed}")  # its own stream: same traffic either way

    def step(self) -> int:
        return self._pd_step() + super().step()

    @abc.abstractmethod
    def _pd_step(self) -> int:
        """This side's queues for one step (bootstrap, transfer polls and their exits);
        returns the cache operations made, as ``step`` does."""

    def _enqueue(self, arrivals: int) -> None:
        """Arrivals enter the bootstrap (prealloc) queue, each with its fates."""
        exits = self.load.exits
        for _ in range(arrivals):
            request = self.traffic.next_request()
            fate = draw_fate(exits, self._fates, request.output_len) if exits.on else Fate(FINISH)
            path, after = self._draw_pd_path()
            if path is not None or fate.path in self.skipped_exits:
                fate = Fate(FINISH)  # one way out per request
            if len(self.queue) + len(self.bootstrapping) >= self.load.max_waiting:
                self.rejected += 1
                continue
            waiting = Waiting(request, self.steps, fate)
            handoff = Handoff(waiting, self._new_req(waiting), path, after)
            self.handoffs[handoff.req.rid] = handoff
            self._entered(handoff.req)
            self.bootstrapping.append(handoff)

    def _draw_pd_path(self) -> tuple[str | None, int]:
        u = self._pd_fates.random()
        for path, rate in self.pd.rates():
            if u < rate:
                steps = (self.pd.bootstrap_steps if path == ABORT_BOOTSTRAP
                         else self.pd.transfer_steps)
                return path, self._pd_fates.randrange(max(steps, 1))
            u -= rate
        return None, 0

    def _entered(self, req: Req) -> None:
        """A request entered the bootstrap queue (the prefill side starts its prefetch)."""

    def _left(self, h: Handoff, path: str) -> None:
        self.exits[path] += 1
        self._departed(h.req.rid, BRANCH.get(path, path))

    def _departed(self, rid: int, path: str) -> None:
        self.handoffs.pop(rid, None)
        super()._departed(rid, path)

    def _live_rids(self) -> set[int]:
        live = super()._live_rids()
        live.update(h.req.rid for h in (*self.bootstrapping, *self.transferring))
        return live


def pd_gauges(scheduler: Scheduler) -> dict[str, Callable[[], float]]:
    """The PD queues' lengths and each PD exit's counter, for a PD scheduler."""
    if not isinstance(scheduler, DisaggScheduler):
        return {}
    s = scheduler
    gauges: dict[str, Callable[[], float]] = {
        "pd_bootstrapping": lambda: len(s.bootstrapping),
        "pd_transferring": lambda: len(s.transferring),
    }
    for path in PD_PATHS:
        gauges[_gauge(path)] = functools.partial(s.exits.__getitem__, path)
    return gauges


def pd_expects(scheduler: Scheduler) -> dict[str, str]:
    """The PD exit counters a run must see rise: each path the load takes."""
    if not isinstance(scheduler, DisaggScheduler):
        return {}
    return {_gauge(path): PATH_WORDS[path] for path, rate in scheduler.pd.rates() if rate > 0}


def _gauge(path: str) -> str:
    return f"exits_{path.replace('-', '_')}"
