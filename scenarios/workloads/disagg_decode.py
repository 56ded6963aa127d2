"""The decode side of PD: prealloc queue, transfer queue, waiting queue, decode.

SGLang's ``disaggregation/decode.py`` and the scheduler's ``abort_request`` on a
decode server (``scenarios.workloads.disagg`` tells both sides).
"""

from __future__ import annotations

from refcache.req import Req
from scenarios.workloads.disagg import (
    BOOTSTRAPPING,
    FAILED,
    TRANSFERRING,
    DisaggScheduler,
    Handoff,
)
from scenarios.workloads.disagg_load import ABORT_BOOTSTRAP, ABORT_TRANSFER
from scenarios.workloads.protocol import as_bool
from scenarios.workloads.request_state import Running


class DecodeScheduler(DisaggScheduler):
    """The decode server: prealloc queue, transfer queue, waiting queue, decode."""

    def _pd_step(self) -> int:
        return self._pop_preallocated() + self._pop_transferred()

    def _pop_preallocated(self) -> int:
        ops = 0
        for h in list(self.bootstrapping):
            poll = self.backend.bootstrap(h)
            if poll == BOOTSTRAPPING:
                continue
            ops += 1
            if poll == FAILED:  # handshake failed or aborted: nothing taken yet
                self.bootstrapping.remove(h)
                self._left(h, h.path or ABORT_BOOTSTRAP)
                continue
            self.serving.rid = h.req.rid
            fit = self._preallocate(h)
            if fit is False:
                break  # the pass stops at the first request that does not fit
            self.bootstrapping.remove(h)
            if fit:
                self.transferring.append(h)
        return ops

    def _preallocate(self, h: Handoff) -> bool | None:
        """A request row, a metadata row, then the KV (``_pre_alloc``), each only if the
        one before fit; what was taken goes back when a later one does not. None: the
        request can never fit (nothing else holds KV) and is dropped."""
        req, cache = h.req, self.cache
        if not as_bool("alloc_req_slot(req)", cache.alloc_req_slot(req)):
            return False
        if not as_bool("alloc_metadata_buffer(req)", cache.alloc_metadata_buffer(req)):
            cache.free_req_slot(req)
            return False
        if as_bool("alloc_request(req)", cache.alloc_request(req)):
            return True
        self.alloc_failures += 1
        cache.free_metadata_buffer(req)
        cache.free_req_slot(req)
        if not (self.running or self.transferring or self.queue):  # can never fit: drop it
            self.dropped += 1
            self._departed(req.rid, "dropped")
            return None
        return False

    def _pop_transferred(self) -> int:
        ops = 0
        for h in list(self.transferring):
            poll = self.backend.transfer(h)
            if poll == TRANSFERRING:
                continue
            ops += 1
            self.transferring.remove(h)
            self.serving.rid = h.req.rid
            self.cache.free_metadata_buffer(h.req)
            if poll == FAILED:  # release the preallocated KV, never cached
                self.cache.cache_finished_req(h.req, is_insert=False)
                self.cache.free_req_slot(h.req)
                self._left(h, h.path or ABORT_TRANSFER)
                continue
            h.waiting.since = self.steps
            self.queue.append(h.waiting)
        return ops

    def _admit(self) -> int:
        """A prebuilt batch: transferred requests run with the KV they hold."""
        ops = 0
        for waiting in list(self.queue):
            if len(self.running) >= self.load.max_running:
                break
            req = waiting.req
            assert req is not None
            self.queue.remove(waiting)
            self.admitted += 1
            self.running.append(Running(req, waiting.request, len(waiting.request.prompt),
                                        fate=waiting.fate))
            ops += 1
        return ops

    def _released_waiting(self, req: Req, path: str = "drain") -> None:
        """``abort_request`` on a transferred waiting request: ``release_kv_cache`` (its KV
        goes into the tree) and its request row."""
        self.cache.cache_finished_req(req)
        self.cache.free_req_slot(req)

    def _release(self, run: Running, path: str) -> int:
        ops = super()._release(run, path)
        self.cache.free_req_slot(run.req)
        return ops

    def _finish(self, run: Running) -> int:
        ops = super()._finish(run)
        self.cache.free_req_slot(run.req)
        return ops

    def _batch_in_flight(self) -> bool:
        return bool(self.transferring or self.queue)  # both hold preallocated KV

    def drain(self) -> None:
        """Shutdown: transfers in flight are aborted, the prealloc queue dropped."""
        for h in list(self.transferring):
            self.cache.free_metadata_buffer(h.req)
            self.cache.cache_finished_req(h.req, is_insert=False)
            self.cache.free_req_slot(h.req)
        self.transferring.clear()
        self.bootstrapping.clear()
        super().drain()
        for waiting in list(self.queue):  # without exit calls the base drain leaves them
            if waiting.req is not None:
                self._released_waiting(waiting.req)
        self.queue.clear()
