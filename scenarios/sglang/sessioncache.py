"""Streaming sessions on SGLang's own code (0.5.23): the adapter of the ``*-sessions`` scenarios.

SGLang 0.5.23 keeps a streaming session's KV record inside ``UnifiedRadixCache``
(``cache.session``, a ``StreamingSession``) and its scheduler's ``SessionController``
opens and closes sessions and builds each turn's ``Req``. This adapter drives both as
the scheduler does, on the Mamba family's cache (FULL+MAMBA):

- ``open_session``: ``SessionController.open(OpenSessionReqInput(streaming=True))``
  (``Scheduler.open_session``).
- a turn: ``Session.create_req(TokenizedGenerateReqInput)`` (``Scheduler``'s
  ``_handle_generate_request`` for a request of an open session) with the turn's new
  tokens only: SGLang appends them to the previous turn's tokens itself. From there
  the handle lifecycle of ``handles.py``, whose SGLang calls take the session's paths:
  the admission match borrows the record (``try_match_prefix``), the first row
  allocation hands it to the session (``maybe_hand_to_session``), a finished turn
  keeps it (``release_kv_cache`` -> ``claim_kv_row``), an aborted one gets it back
  and releases it.
- a turn refused admission keeps its ``Req`` (SGLang's rejected request matches again
  next cycle and borrows the same record); a turn that never runs is retired as the
  scheduler's ``_release_aborted_request`` does (``Session.abort_req``).
- ``close_session``: ``SessionController.close(CloseSessionReqInput)``, which calls
  ``release_session``; deferred closes are finished by ``maybe_reap``, as the
  scheduler's loop does.
- the books: SGLang's idle checker adds the session records
  (``cache.session_records()``) as ``session_held``, with its pool-stats observer's
  formulas (``kv_private_tokens``, ``kv_mamba_slots``; a record's request row too),
  for open sessions only: a record a closed session left behind is lost, where SGLang's
  checker would still count it held.

Releases before 0.5.23 decline (``scenarios/sglang/sessions.py``).
"""

from __future__ import annotations

import dataclasses
import time
from array import array
from collections.abc import Mapping
from typing import Any

import torch

from refcache.pools import PoolAccount
from refcache.req import Req
from scenarios.sglang import glue, handles, sessions

MODULES = ("sglang.srt.managers.io_struct", "sglang.srt.session.session_controller",
           "sglang.srt.managers.scheduler_components.pool_stats_observer")
CAPACITY = 1 << 30  # capacity_of_str_len: the harness bounds a session's length itself
VOCAB = 1 << 30  # vocab_size of a turn's Req: the harness's token ids are all valid


def build(options: Mapping[str, Any]) -> handles.HandleCache:
    """``UnifiedRadixCache`` (FULL+MAMBA) with SGLang's streaming sessions."""
    reason = sessions.declines(options)
    if reason:
        raise glue.GlueError(f"not mapped on SGLang: {reason}")
    return handles.build("mamba", options, cls=SessionHandleCache)


def _sid(session_id: Any) -> str:
    return str(session_id)


class SessionHandleCache(handles.HandleCache):
    """``HandleCache`` with SGLang's ``SessionController`` opening sessions and building
    each turn's ``Req``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.io, controller, self.observer = glue.import_modules(MODULES)
        self.controller = controller.SessionController(self.cache)
        # Each session's turn whose Req SGLang created (create_req marks the session in
        # flight) and that has not finished, aborted or been retired yet.
        self._turns: dict[str, tuple[int, Any]] = {}
        self.family = "sessions"
        self.kind += " + streaming sessions"

    # ---------------------------------------------------------------- sessions
    def open_session(self, session_id: Any) -> None:
        out = self.controller.open(self.io.OpenSessionReqInput(
            capacity_of_str_len=CAPACITY, session_id=_sid(session_id), streaming=True))
        if not out.success:
            raise ValueError(f"SGLang's SessionController refused to open {session_id!r}")

    def close_session(self, session_id: Any) -> None:
        sid = _sid(session_id)
        self._retire_pending(sid, None)  # a turn that never ran (dropped) holds nothing
        self.controller.close(self.io.CloseSessionReqInput(session_id=sid))
        self._reap()

    def _reap(self) -> None:
        """The scheduler's loop calls ``maybe_reap`` every second; here after each event
        that can complete a deferred close."""
        self.controller.maybe_reap(time.monotonic(), interval=0.0)

    # ---------------------------------------------------------------- turns
    def _sgl(self, req: Req) -> Any:
        if AUX in req.aux or req.session_id is None:
            return super()._sgl(req)
        sid = _sid(req.session_id)
        session = self.controller.get(sid)
        if session is None or session.close_on_finish:  # closed: a plain request
            return super()._sgl(req)
        self._retire_pending(sid, req.rid)
        sreq = session.create_req(self._generate_input(req, session), None, VOCAB)
        if sreq.finished_reason is not None:
            raise glue.GlueError(f"SGLang aborted turn {req.rid} of session {sid}: "
                                 f"{sreq.finished_reason}")
        req.aux[AUX] = sreq
        self._turns[sid] = (req.rid, sreq)
        return sreq

    def _generate_input(self, req: Req, session: Any) -> Any:
        """What the tokenizer sends for a turn: its new tokens after the session's."""
        history = _history(session)
        if list(req.token_ids[:len(history)]) != history:
            raise AssertionError(f"turn {req.rid} does not extend session "
                                 f"{session.session_id}'s tokens (append-only)")
        sampling = self.mods.sampling.SamplingParams(max_new_tokens=handles.NO_LIMIT)
        return self.io.TokenizedGenerateReqInput(
            rid=f"h{req.rid}", input_text=None,
            input_ids=array("q", req.token_ids[len(history):]), input_embeds=None,
            mm_inputs=None, token_type_ids=None, sampling_params=sampling,
            return_logprob=False, logprob_start_len=-1, top_logprobs_num=0,
            token_ids_logprob=None, stream=False,
            session_params=self.io.SessionParams(id=session.session_id))

    def _retire_pending(self, sid: str, rid: int | None) -> None:
        """A previous turn of ``sid`` that never ran (the harness dropped it from the
        queue): retired as the scheduler's ``_release_aborted_request`` does."""
        pending = self._turns.get(sid)
        if pending is None or pending[0] == rid:
            return
        del self._turns[sid]
        sreq = pending[1]
        sreq.finished_reason = self.mods.batch.FINISH_ABORT()
        self.cache.finish(sreq.cache_request_handle, self._abort)
        if sreq.session is not None:
            sreq.session.abort_req()
            sreq.session = None

    def _turn_over(self, req: Req) -> None:
        if req.session_id is not None:
            sid = _sid(req.session_id)
            if self._turns.get(sid, (None,))[0] == req.rid:
                del self._turns[sid]
            self._reap()

    def _admission_refused(self, req: Req, sreq: Any) -> None:
        """A turn keeps its Req (its session is in flight); a borrowed record stays the
        session's: SGLang's rejected request matches again and borrows it again."""
        if sreq.session is None:
            super()._admission_refused(req, sreq)
            return
        self.cache.unlock(sreq.lock)
        sreq.lock = None
        borrowed = self.cache.session.borrowed_slot(sreq) is not None
        if sreq.kv.holds_mamba and not borrowed:  # a first turn's forked state
            self.mods.common.release_kv_cache(sreq, self.cache, checkpoint=False)

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        super().cache_finished_req(req, is_insert)
        self._turn_over(req)

    def release_aborted_request(self, req: Req) -> None:
        sreq = req.aux.get(AUX)
        if sreq is None or sreq.session is None:
            super().release_aborted_request(req)
            return
        del req.aux[AUX]
        self._waiting.pop(req.rid, None)
        self._retire_pending(_sid(req.session_id), None)

    # ---------------------------------------------------------------- books
    def _records(self) -> list[Any]:
        """The records of open sessions holding a row (the pool-stats observer's
        ``_session_kv_rows``, less closed sessions'). SGLang's checker counts every
        record as session-held; a session the controller has closed holds nothing, so
        a record it left behind (a close that skipped ``release_session``) is lost."""
        return [kv for sid, kv in self.cache.session_records().items()
                if kv.holds_kv and sid in self.controller]

    def pool_accounting(self) -> dict[str, PoolAccount]:
        """SGLang's idle check with its session-held terms: per record, the tokens past
        its tree prefix, its Mamba slots, its request row."""
        books = super().pool_accounting()
        records, page = self._records(), int(self.cache.page_size)
        held = {"full": sum(int(self.observer.kv_private_tokens(kv, page)) for kv in records),
                "mamba": sum(int(self.observer.kv_mamba_slots(kv)) for kv in records),
                "req_rows": len(records)}
        for name, n in held.items():
            if name in books:
                books[name] = dataclasses.replace(books[name], session_held=n)
        books["full"] = dataclasses.replace(books["full"], session_locked=self._session_locked())
        return books

    def _session_locked(self) -> int:
        """Full tokens on the prefixes the sessions' tree locks hold (a node once)."""
        seen: dict[int, int] = {}
        node_by_id = getattr(self.cache.tree_core, "node_by_id", None)
        if not self._walkable() or not callable(node_by_id):
            return 0  # the Rust core's nodes cannot be read (its notes say so)
        for slot in self.cache.session.slots.values():
            node = node_by_id(slot.lock.node) if slot.lock is not None else None
            while node is not None and node is not self.root_node and id(node) not in seen:
                seen[id(node)] = sum(int(ids.numel()) for pool, ids in self._node_slots(node)
                                     if pool == "full")
                node = node.parent
        return sum(seen.values())

    def held_slots(self) -> dict[str, torch.Tensor]:
        """The tree's ids and the session records' (held, not lost)."""
        held = super().held_slots()
        for kv in self._records():
            own = {"full": self.req_pool.req_to_token[
                       kv.req_pool_idx, kv.cache_protected_len:kv.kv_allocated_len],
                   "mamba": kv.mamba_pool_idx.reshape(-1) if kv.holds_mamba else None}
            for pool, ids in own.items():
                if pool in held and ids is not None:
                    held[pool] = torch.cat((held[pool], ids.to(torch.int64)))
        return held

    def stats(self) -> dict[str, float]:
        records = self.cache.session_records()
        return {**super().stats(), "sessions_open": float(len(self.controller.sessions)),
                "session_records": float(len(records)),
                "closed_session_records": float(sum(1 for sid in records
                                                    if sid not in self.controller))}

    def notes(self) -> list[str]:
        return [*super().notes(),
                "streaming sessions: SGLang's SessionController opens and closes them and "
                "builds each turn's Req (Session.create_req); the Mamba pool has no extra "
                "buffer (no ping-pong track buffers), so a session holds 1 state slot"]


AUX = handles.AUX


def _history(session: Any) -> list[int]:
    """The session's tokens after its last finished turn, as ``create_req`` rebuilds
    them (``_share_token_arrays``): the committed prompt, then that turn's output."""
    if not session.req_nodes:
        return []
    [node] = session.req_nodes.values()
    last = node.req
    prompt = list(last.origin_input_ids[:session.committed_origin_len])
    return prompt + list(last.output_ids[:last.sampling_params.max_new_tokens])
