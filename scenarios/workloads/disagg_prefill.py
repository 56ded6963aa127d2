"""The prefill side of PD: bootstrap queue, waiting queue, forward, inflight queue.

SGLang's ``disaggregation/prefill.py`` and the scheduler's ``abort_request`` on a
prefill server (``scenarios.workloads.disagg`` tells both sides). The two incidents
whose site is here: SGLang #17483 (``_released_waiting``) and #15439
(``_bootstrap_failed``).
"""

from __future__ import annotations

from refcache.req import Req
from scenarios.workloads.disagg import (
    ABORT_WAITING_METADATA,
    BOOTSTRAP_FAILURE_PREFETCH,
    BOOTSTRAPPING,
    FAILED,
    SUCCESS,
    TRANSFERRING,
    DisaggScheduler,
    Handoff,
)
from scenarios.workloads.disagg_load import ABORT_BOOTSTRAP, ABORT_TRANSFER
from scenarios.workloads.exits import ABORT_WAITING, FINISH, TIMEOUT
from scenarios.workloads.protocol import as_bool
from scenarios.workloads.request_state import Running


class PrefillScheduler(DisaggScheduler):
    """The prefill server: bootstrap queue, waiting queue, forward, inflight queue."""

    def _entered(self, req: Req) -> None:
        if self.support.match_waiting:  # _prefetch_kvcache, before the bootstrap queue
            self.serving.rid = req.rid
            self.cache.match_waiting_req(req)

    def _pd_step(self) -> int:
        return self._pop_bootstrapped() + self._pop_inflight()

    def _pop_bootstrapped(self) -> int:
        ops = 0
        for h in list(self.bootstrapping):
            poll = self.backend.bootstrap(h)
            if poll == BOOTSTRAPPING:
                continue
            self.serving.rid = h.req.rid
            ops += 1
            if poll == FAILED:
                self.bootstrapping.remove(h)
                self._bootstrap_failed(h)
                continue
            if not as_bool("alloc_metadata_buffer(req)", self.cache.alloc_metadata_buffer(h.req)):
                break  # no metadata row free: the rest wait (SGLang breaks the pass)
            self.bootstrapping.remove(h)
            h.waiting.since = self.steps
            self.queue.append(h.waiting)
        return ops

    def _bootstrap_failed(self, h: Handoff) -> None:
        """``pop_bootstrapped`` on ``KVPoll.Failed``: the prefetch started at queue entry
        goes back. SGLang #15439 (v0.5.7): this path never called release_aborted_request."""
        if BOOTSTRAP_FAILURE_PREFETCH not in self.inject and self.support.release_waiting:
            self.cache.release_aborted_request(h.req)
        self._left(h, h.path or ABORT_BOOTSTRAP)

    def _released_waiting(self, req: Req, path: str) -> None:
        """A waiting request leaves: after the prefetch, its metadata row. SGLang #17483:
        ``abort_request`` (an abort or a timeout) never freed the row pop_bootstrapped took."""
        if ABORT_WAITING_METADATA not in self.inject or path not in (ABORT_WAITING, TIMEOUT):
            self.cache.free_metadata_buffer(req)

    def _holds_kv_elsewhere(self) -> bool:
        return bool(self.transferring)

    def _decode(self) -> int:
        """The prefill forward (one output token, ``max_new_tokens = 1``) is done: each
        running request moves to the inflight queue, where its KV is sent."""
        ops = 0
        for run in list(self.running):
            self.serving.rid = run.req.rid
            if self._leaves_running(run):
                ops += self._release(run, run.fate.path)
                continue
            self.running.remove(run)
            self.decoded += 1
            h = self.handoffs[run.req.rid]
            h.run = run
            self.transferring.append(h)
            ops += 1
        return ops

    def _pop_inflight(self) -> int:
        """``process_disagg_prefill_inflight_queue``: success and failure both release the
        KV into the tree (``release_kv_cache``) and the metadata row."""
        ops = 0
        for h in list(self.transferring):
            poll = self.backend.transfer(h)
            if poll == TRANSFERRING:
                continue
            self.transferring.remove(h)
            ops += self._transfer_ended(h, FINISH if poll == SUCCESS else h.path or ABORT_TRANSFER)
        return ops

    def _transfer_ended(self, h: Handoff, path: str) -> int:
        self.serving.rid = h.req.rid
        self.cache.cache_finished_req(h.req)
        self.cache.free_metadata_buffer(h.req)
        if path == FINISH:
            assert h.run is not None
            self.traffic.record_reply(h.run.request, h.run.generated)
            self.finished += 1
            self._departed(h.req.rid, FINISH)
        else:
            self._left(h, path)
        return 2

    def _batch_in_flight(self) -> bool:
        return bool(self.transferring)  # their KV is outside the tree until the transfer ends

    def _release(self, run: Running, path: str) -> int:
        ops = super()._release(run, path)
        self.cache.free_metadata_buffer(run.req)
        return ops

    def _finish(self, run: Running) -> int:
        ops = super()._finish(run)
        self.cache.free_metadata_buffer(run.req)
        return ops

    def drain(self) -> None:
        """Shutdown: transfers in flight complete; the bootstrap queue is aborted."""
        for h in list(self.transferring):
            self._transfer_ended(h, FINISH)
        self.transferring.clear()
        for h in list(self.bootstrapping):
            self._bootstrap_failed(h)
        self.bootstrapping.clear()
        super().drain()
