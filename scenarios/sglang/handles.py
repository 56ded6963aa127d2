"""The cache protocol on SGLang's own caches, with the handle-based lifecycle (0.5.23).

From 0.5.23 SGLang has no ``cache_finished_req``/``cache_unfinished_req``: its
scheduler drives a request through functions of ``sglang.srt.mem_cache.common``
and ``allocation`` and the cache's handle calls. This adapter makes the same calls,
in the scheduler's order, on SGLang's own ``Req`` objects and pools:

- ``alloc_request``: ``Req.init_next_round_input(tree_cache)`` (the admission match,
  through ``match_kv_cache``), ``tree_cache.lock(req.last_node)`` (as ``PrefillAdder``
  commits an admission), ``alloc_req_slots``, ``alloc_token_slots``,
  ``ReqToTokenPool.write``, ``tree_cache.maybe_hand_to_session``.
- ``cache_unfinished_req``: ``checkpoint_kv_cache`` (chunked prefill).
- ``extend_request``: ``alloc_token_slots`` and ``ReqToTokenPool.write`` (decode);
  ``alloc_tokens``/``free_tokens`` for overlap scheduling: ``alloc_token_slots`` and
  the allocator's ``free``.
- ``cache_finished_req``: ``release_kv_cache(checkpoint=True)``, the request
  finished by length (``FINISH_LENGTH``).
- ``cache_finished_req(is_insert=False)`` (abort, failure, retraction of a running
  request): ``tree_cache.finish(handle, ABORT)`` then ``release_kv_cache(checkpoint=False)``,
  as the scheduler aborts a running request (retraction's ``release_req`` makes the
  same ``release_kv_cache`` call).
- ``release_aborted_request`` (a waiting request leaves): ``tree_cache.finish(handle,
  ABORT)``, and ``release_kv_cache(checkpoint=False)`` when it holds a Mamba slot, as
  the scheduler aborts a queued request.
- ``match_waiting_req``: ``match_kv_cache`` (the policy's match over the queue).
- ``check_prefetch_progress``: ``tree_cache.check_prefetch_progress(handle)``, only
  where the cache has it.

The harness's ``Req`` keeps SGLang's ``Req`` in ``req.aux["sglang"]``; its
``kv_indices`` are read back from the request's ``req_to_token`` row.
"""

from __future__ import annotations

import os
import weakref
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from refcache.pools import PoolAccount

# What match_prefix returns to the scheduler: SGLang's MatchResult fields.
from refcache.radix_tree import MatchResult
from refcache.req import Req
from scenarios.sglang import compat, glue

MODULES = (
    "sglang.srt.mem_cache.radix_cache",
    "sglang.srt.mem_cache.cache_init_params",
    "sglang.srt.mem_cache.allocator",
    "sglang.srt.mem_cache.memory_pool",
    "sglang.srt.managers.schedule_batch",
    "sglang.srt.mem_cache.common",
    "sglang.srt.mem_cache.base_prefix_cache",
    "sglang.srt.sampling.sampling_params",
    "sglang.srt.mem_cache.allocation",
    "sglang.srt.server_args",
)
UNIFIED_MODULES = (
    "sglang.srt.mem_cache.unified_radix_cache",
    "sglang.srt.mem_cache.unified_cache.component_type",
    "sglang.srt.mem_cache.unified_cache.unified_tree_core",
)
# 0.5.23's unified tree core: "python" (default here: its nodes can be counted) or
# "rust" (SGLang's default). Not SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND: SGLang reads that.
CORE_ENV_VAR = "LEAK_HARNESS_SGLANG_TREE_CORE"
NO_LIMIT = 1 << 30  # max_new_tokens: the harness decides when a request ends
AUX = "sglang"


class Modules:
    """The SGLang modules the adapter calls, imported once through the glue."""

    def __init__(self, unified: bool) -> None:
        names = (*MODULES, *UNIFIED_MODULES) if unified else MODULES
        mods = dict(zip(names, glue.import_modules(names), strict=True))
        self.radix = mods["sglang.srt.mem_cache.radix_cache"]
        self.init_params = mods["sglang.srt.mem_cache.cache_init_params"]
        self.allocator = mods["sglang.srt.mem_cache.allocator"]
        self.memory_pool = mods["sglang.srt.mem_cache.memory_pool"]
        self.batch = mods["sglang.srt.managers.schedule_batch"]
        self.common = mods["sglang.srt.mem_cache.common"]
        self.base = mods["sglang.srt.mem_cache.base_prefix_cache"]
        self.sampling = mods["sglang.srt.sampling.sampling_params"]
        self.allocation = mods["sglang.srt.mem_cache.allocation"]
        self.server_args = mods["sglang.srt.server_args"]
        self.unified = mods.get("sglang.srt.mem_cache.unified_radix_cache")
        self.components = mods.get("sglang.srt.mem_cache.unified_cache.component_type")
        self.tree_core = mods.get("sglang.srt.mem_cache.unified_cache.unified_tree_core")


_PUBLISHED = False


def publish_server_args(mods: Modules) -> None:
    """SGLang reads its runtime context at call time (``get_serving()``, ``get_spec()``
    in ``release_kv_cache``): install a default ``ServerArgs`` once, as a scheduler
    process does at start-up."""
    global _PUBLISHED
    if _PUBLISHED:
        return
    args = mods.server_args.ServerArgs(model_path="leak-harness-no-model")
    # Mamba's chunk size comes from the model's HF config unless pre-seeded, as SGLang's
    # own test fixtures do for a model-less run (arg_groups/overrides.py); 64 is FLA's.
    args._mamba_cache_chunk_size = 64
    # A direct install, without the launch-time resolution (which reads the model's
    # config from a hub): the cache code reads only defaults from these namespaces.
    try:
        compat.server_args_publisher(mods.server_args, compat.runtime_context())(args)
    except LookupError as exc:
        raise glue.GlueError(str(exc)) from None
    _PUBLISHED = True


class NodeCensus:
    """Every tree node created, in a WeakSet (SGLang's node classes take weak references):
    the ones alive but unreachable from the root are detached-but-alive nodes."""

    def __init__(self) -> None:
        self.nodes: weakref.WeakSet[Any] = weakref.WeakSet()

    def watch(self, cls: type) -> None:
        """Record each new ``cls`` instance (wraps ``cls.__init__`` once per process)."""
        marker = "_leak_harness_census"
        census = getattr(cls, marker, None)
        if census is None:
            original = getattr(cls, "__init__")  # noqa: B009
            census = _CENSUSES.setdefault(cls, [])

            def init(node: Any, *args: Any, **kwargs: Any) -> None:
                original(node, *args, **kwargs)
                for each in census:
                    each.nodes.add(node)

            setattr(cls, "__init__", init)  # noqa: B010 (mypy: no assignment to __init__)
            setattr(cls, marker, census)
        census.append(self)

    def unwatch(self) -> None:
        for census in _CENSUSES.values():
            if self in census:
                census.remove(self)


_CENSUSES: dict[type, list[NodeCensus]] = {}


def _supports(cache: Any, name: str) -> bool:
    method = getattr(cache, name, None)
    return bool(method()) if callable(method) else False


def _locks(node: Any) -> int:
    """A node's device locks: ``lock_ref`` on a ``TreeNode``; on a ``UnifiedTreeNode``
    the largest ``lock_ref`` of its components."""
    lock_ref = getattr(node, "lock_ref", None)
    if lock_ref is not None:
        return int(lock_ref)
    return max((int(d.lock_ref) for d in getattr(node, "component_data", ())), default=0)


def _sentinel(node: Any) -> bool:
    """An LRU list's head or tail (``UnifiedLRUList``): never in the tree, no key, no
    parent, alive as long as its list; not a detached node."""
    return node.parent is None and node.key is None


def _take_ids(req: Req, sreq: Any) -> None:
    """The harness's token ids into SGLang's ``Req`` before the tree keys on them: a
    dLLM block's ids change in place while it denoises (as SGLang writes a resolved
    block into ``full_untruncated_fill_ids`` and ``output_ids``); otherwise a no-op."""
    outputs = array("q", req.token_ids[len(sreq.origin_input_ids):])
    if outputs != sreq.output_ids:
        sreq.output_ids[:] = outputs
        sreq.full_untruncated_fill_ids = sreq.origin_input_ids + outputs


def forget_slots(req: Req) -> None:
    """The harness's mirror of a request SGLang retracted: it holds nothing now."""
    req.kv_indices = req.kv_indices[:0]
    req.prefix_len, req.last_node, req.state_slot = 0, None, None


def walk(root: Any) -> Iterator[Any]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())


class HandleCache:
    """A SGLang cache (0.5.23 API) behind the harness's cache protocol."""

    def __init__(self, mods: Modules, cache: Any, req_pool: Any, family: str, kind: str,
                 census: NodeCensus | None, notes: Sequence[str] = ()) -> None:
        self.mods, self.cache, self.req_pool = mods, cache, req_pool
        self.kv = cache.token_to_kv_pool_allocator
        self.family, self.kind = family, kind
        self.census = census
        self._notes = list(notes)
        try:
            self.root_node = cache.root_node
        except (AttributeError, NotImplementedError):  # the Rust tree core has none
            self.root_node = None
        outcome = getattr(mods.base, "CacheRequestOutcome", None)  # 0.5.23+
        self._abort = outcome.ABORT if outcome is not None else None
        self._release_req = compat.release_req(mods.batch, mods.server_args)
        # SGLang Reqs of waiting requests the policy matched: they keep the matched
        # nodes (last_node, best_match_node) unlocked, as SGLang's waiting queue does.
        self._waiting: dict[int, Any] = {}
        self._swa = _supports(cache, "supports_swa")
        self._mamba = _supports(cache, "supports_mamba")
        if not callable(getattr(cache, "check_prefetch_progress", None)):
            self.check_prefetch_progress = None  # type: ignore[assignment]
        # Paged KV: SGLang allocates a request's slots from its row's last slot on
        # (alloc_paged_token_slots_extend); a batch's slots without a row it cannot.
        self.page_size = int(getattr(self.kv, "page_size", 1) or 1)
        if self.page_size > 1:
            self.alloc_tokens = None  # type: ignore[assignment]

    # ---------------------------------------------------------------- requests
    def _sgl(self, req: Req) -> Any:
        sreq = req.aux.get(AUX)
        if sreq is None:
            sampling = self.mods.sampling.SamplingParams(max_new_tokens=NO_LIMIT)
            sreq = self.mods.batch.Req(f"h{req.rid}", "", array("q", req.token_ids), sampling)
            req.aux[AUX] = sreq
        return sreq

    def _row(self, sreq: Any, length: int) -> torch.Tensor:
        row: torch.Tensor = self.req_pool.req_to_token[sreq.kv.req_pool_idx, :length]
        return row.to(torch.int64)

    def _room(self, n: int) -> bool:
        """Whether ``n`` slots can be had, evicting (each pool SGLang allocates from)."""
        if self._swa:
            return bool(self.kv.full_available_size() + self.cache.full_evictable_size() >= n
                        and self.kv.swa_available_size() + self.cache.swa_evictable_size() >= n)
        if self.page_size > 1:  # SGLang's over-estimate: one new page per request
            n += self.page_size
        return bool(self.kv.available_size() + self.full_evictable_size() >= n)

    def _alloc_paged(self, start: int, n: int, last_loc: int) -> torch.Tensor:
        """Paged slots for row positions ``start .. start + n`` of a request whose slot
        at ``start - 1`` is ``last_loc`` (-1: none): ``alloc_paged_token_slots_extend``
        with the inputs ``alloc_for_extend`` builds for a batch of one (a dLLM block is
        an extend batch there too)."""
        prefix = torch.tensor([start], dtype=torch.int64)
        seq = torch.tensor([start + n], dtype=torch.int64)
        last = torch.tensor([last_loc], dtype=torch.int64)
        return self.mods.allocation.alloc_paged_token_slots_extend(  # type: ignore[no-any-return]
            self.cache, prefix, prefix, seq, seq, last, n)

    def alloc_request(self, req: Req) -> bool:
        sreq = self._sgl(req)
        m = self.mods
        sreq.init_next_round_input(self.cache)  # SGLang's admission match
        total = len(sreq.full_untruncated_fill_ids)
        sreq.extend_end = total
        sreq.lock = self.cache.lock(sreq.last_node)  # as PrefillAdder commits an admission
        need = total - sreq.prefix_len
        if (self.req_pool.available_size() < 1 or not self._room(need)
                or not m.allocation.ensure_mamba_capacity(self.req_pool, [sreq], self.cache)):
            self._admission_refused(req, sreq)
            return False
        m.allocation.alloc_req_slots(self.req_pool, [sreq], self.cache)
        prefix = self._prefix_indices(sreq)
        if self.page_size == 1:
            slots = m.allocation.alloc_token_slots(self.cache, need)
        else:
            slots = self._alloc_paged(sreq.prefix_len, need,
                                      int(prefix[-1]) if prefix is not None else -1)
        idx = sreq.kv.req_pool_idx
        if prefix is not None:
            self.req_pool.write((idx, slice(0, sreq.prefix_len)), prefix)
        self.req_pool.write((idx, slice(sreq.prefix_len, total)), slots)
        sreq.kv.kv_allocated_len = sreq.kv.kv_committed_len = total
        self.cache.maybe_hand_to_session(sreq)
        self._mirror(req, sreq, total)
        self._waiting.pop(req.rid, None)
        return True

    def _admission_refused(self, req: Req, sreq: Any) -> None:
        """Admission refused: the admission's lock and forked state go back."""
        self.cache.unlock(sreq.lock)
        sreq.lock = None
        if sreq.kv.holds_mamba:  # the state the match forked (cow_mamba) goes back
            self.mods.common.release_kv_cache(sreq, self.cache, checkpoint=False)
        if not sreq.is_retracted:  # a retracted Req waits as itself, as in SGLang's queue
            del req.aux[AUX]  # the next attempt matches afresh

    def _prefix_indices(self, sreq: Any) -> torch.Tensor | None:
        """The matched prefix's slots, as ``allocation._prefix_kv_indices`` reads them: a
        request holding its row (a borrowed session record) has them there, a new one
        reads them off the tree."""
        if not sreq.prefix_len:
            return None
        if sreq.kv.holds_kv:
            return self._row(sreq, sreq.prefix_len)
        return self.cache.prefix_device_indices(sreq)  # type: ignore[no-any-return]

    def _mirror(self, req: Req, sreq: Any, length: int) -> None:
        req.kv_indices = self._row(sreq, length)
        req.prefix_len = int(sreq.kv.cache_protected_len)
        req.last_node = sreq.last_node

    def cache_unfinished_req(self, req: Req) -> None:
        sreq = req.aux[AUX]
        _take_ids(req, sreq)
        if req.unsettled:
            # A dLLM block still denoising: SGLang's scheduler checkpoints a block only
            # once resolved (finish_dllm_forward returns while dllm_incomplete_ids).
            return
        sreq.extend_end = sreq.kv.kv_committed_len
        self.mods.common.checkpoint_kv_cache(sreq, self.cache)
        self._mirror(req, sreq, sreq.kv.kv_committed_len)

    def extend_request(self, req: Req, tokens: list[int],
                       slots: torch.Tensor | None = None) -> bool:
        sreq = req.aux[AUX]
        n = len(tokens)
        if self._swa and sreq.output_ids:
            # ScheduleBatch.maybe_evict_swa in decode (past the first decode batch): the
            # request's own SWA slots behind its window go back through the cache.
            self.cache.evict_sliding_windows(sreq, sreq.seqlen - 1)
        start = sreq.kv.kv_committed_len
        if slots is None:
            if not self._room(n):
                return False
            if self.page_size == 1:
                slots = self.mods.allocation.alloc_token_slots(self.cache, n)
            else:
                last = int(self.req_pool.req_to_token[sreq.kv.req_pool_idx, start - 1])
                slots = self._alloc_paged(start, n, last)
        self.req_pool.write((sreq.kv.req_pool_idx, slice(start, start + n)), slots)
        sreq.output_ids.extend(tokens)
        sreq.kv.kv_allocated_len = sreq.kv.kv_committed_len = start + n
        req.token_ids.extend(tokens)
        req.kv_indices = torch.cat((req.kv_indices, slots.to(torch.int64)))
        return True

    def alloc_tokens(self, n: int) -> Any:
        """A decode batch's slots at launch (SGLang's ``alloc_token_slots``), or None."""
        if not self._room(n):
            return None
        return self.mods.allocation.alloc_token_slots(self.cache, n)

    def free_tokens(self, slots: torch.Tensor) -> None:
        self.kv.free(slots)

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        sreq = req.aux.pop(AUX)
        common = self.mods.common
        if is_insert:
            _take_ids(req, sreq)
            sreq.finished_reason = self.mods.batch.FINISH_LENGTH(length=len(sreq.output_ids))
            common.release_kv_cache(sreq, self.cache, checkpoint=True)
        else:
            sreq.finished_reason = self.mods.batch.FINISH_ABORT()
            self.cache.finish(sreq.cache_request_handle, self._abort)
            common.release_kv_cache(sreq, self.cache, checkpoint=False)
        req.last_node = None

    def retract_request(self, req: Req, remaining: int = 0) -> None:
        """``retract_decode``'s ``release_req``: the same Req (and handle) is re-queued,
        reset, with the tokens it decoded."""
        self._release_req(req.aux[AUX], remaining, self.req_pool, self.kv, self.cache)
        forget_slots(req)

    def release_aborted_request(self, req: Req) -> None:
        sreq = req.aux.pop(AUX, None)
        self._waiting.pop(req.rid, None)
        if sreq is None:
            return  # never matched: the cache never saw it
        self.cache.finish(sreq.cache_request_handle, self._abort)
        if sreq.kv.holds_mamba:  # the scheduler's queued-abort path for Mamba caches
            self.mods.common.release_kv_cache(sreq, self.cache, checkpoint=False)
        req.state_slot = None

    def match_waiting_req(self, req: Req) -> None:
        sreq = self._sgl(req)
        self._waiting[req.rid] = sreq
        self.mods.common.match_kv_cache(sreq, self.cache)
        if sreq.kv.holds_mamba:
            req.state_slot = sreq.kv.mamba_pool_idx

    def check_prefetch_progress(self, req: Req) -> bool:
        return bool(self.cache.check_prefetch_progress(self._sgl(req).cache_request_handle))

    # ---------------------------------------------------------------- the tree
    def match_prefix(self, key: Any) -> MatchResult:
        params = self.mods.base.MatchPrefixParams(
            key=self.mods.radix.RadixKey(array("q", key.token_ids), key.extra_key))
        result = self.cache.match_prefix(params)
        node = result.last_device_node
        indices = (self.cache.path_device_indices(node) if result.device_prefix_len
                   else torch.empty(0, dtype=torch.int64))
        return MatchResult(indices, node, None)

    def insert(self, key: Any, value: Any, extra: dict[str, Any] | None = None) -> int:
        params = self.mods.base.InsertParams(
            key=self.mods.radix.RadixKey(array("q", key.token_ids), key.extra_key), value=value)
        return int(self.cache.insert(params).prefix_len)

    def evict(self, num_tokens: int, **per_pool: int) -> int:
        params = self.mods.base.EvictParams(num_tokens=num_tokens)
        return int(self.cache.evict(params).num_tokens_evicted)

    def inc_lock_ref(self, node: Any) -> None:
        self.cache.inc_lock_ref(node)

    def dec_lock_ref(self, node: Any) -> None:
        self.cache.dec_lock_ref(node)

    def check_hicache_events(self) -> None:
        """SGLang calls it only with a host tier (a cache controller); without one the
        base class raises NotImplementedError."""
        if getattr(self.cache, "cache_controller", None) is not None:
            self.cache.check_hicache_events()

    def _hybrid(self) -> bool:
        return self._swa or self._mamba

    def full_evictable_size(self) -> int:
        """As SGLang's pool-stats observer reads it: ``full_evictable_size()`` on a hybrid
        (SWA/Mamba) cache, ``evictable_size()`` otherwise (the base class's
        ``full_evictable_size`` is 0 there)."""
        c = self.cache
        return int(c.full_evictable_size() if self._hybrid() else c.evictable_size())

    def full_protected_size(self) -> int:
        c = self.cache
        return int(c.full_protected_size() if self._hybrid() else c.protected_size())

    # ---------------------------------------------------------------- books
    def pool_accounting(self) -> dict[str, PoolAccount]:
        """SGLang's idle check (``invariant_checker.py``): per pool, available +
        evictable + protected == size; request rows all free at idle."""
        c = self.cache
        size = self.kv.size_full if self._swa else self.kv.size
        books = {"full": PoolAccount(int(size), int(self._full_available()),
                                     self.full_evictable_size(), self.full_protected_size())}
        if self._swa:
            books["swa"] = PoolAccount(int(self.kv.size_swa),
                                       int(self.kv.swa_available_size()),
                                       int(c.swa_evictable_size()), int(c.swa_protected_size()))
        if self._mamba:
            mamba = self._mamba_allocator()
            books["mamba"] = PoolAccount(int(mamba.size), int(mamba.available_size()),
                                         int(c.mamba_evictable_size()),
                                         int(c.mamba_protected_size()))
        books["req_rows"] = PoolAccount(int(self.req_pool.size),
                                        int(self.req_pool.available_size()), 0, 0)
        return books

    def _mamba_allocator(self) -> Any:
        """The Mamba slots' free list: ``MambaSlotAllocator`` (0.5.17 on) or ``MambaPool``."""
        return getattr(self.req_pool, "mamba_allocator", None) or self.req_pool.mamba_pool

    # ---------------------------------------------------------------- provenance
    def _walkable(self) -> bool:
        return self.root_node is not None and hasattr(self.root_node, "children")

    def pool_allocators(self) -> dict[str, Any]:
        """SGLang's own allocator objects behind the pools of the books, for the slot
        ledger (it wraps their ``alloc``/``free``; ids are token or state slot ids): the
        KV allocator, or an SWA allocator's two parts (every free of the outer one ends
        in theirs, ``free_segment`` too), and the Mamba slot allocator. None on the Rust
        core (no nodes to read the held ids from) or paged KV (SGLang allocates pages
        through ``alloc_extend``, which the ledger does not wrap)."""
        if not self._walkable():
            return {}
        pools: dict[str, Any] = {}
        if self.page_size == 1:
            pools["full"] = self.kv.full_attn_allocator if self._swa else self.kv
        if self._swa:
            pools["swa"] = self.kv.swa_attn_allocator
        if self._mamba:
            pools["mamba"] = self._mamba_allocator()
        return pools

    def held_slots(self) -> dict[str, torch.Tensor]:
        """The ids SGLang's tree holds per pool (what its evictable + protected count),
        from a walk of its nodes; asked only when the idle books are short."""
        pools = self.pool_allocators()
        held: dict[str, list[torch.Tensor]] = {pool: [] for pool in pools}
        for node in walk(self.root_node) if pools else ():
            for pool, ids in self._node_slots(node):
                if pool in held:
                    held[pool].append(ids.reshape(-1).to(torch.int64))
        return {pool: torch.cat(ids) if ids else torch.empty(0, dtype=torch.int64)
                for pool, ids in held.items()}

    def _node_slots(self, node: Any) -> Iterator[tuple[str, torch.Tensor]]:
        """A node's device ids per pool. ``UnifiedTreeNode``: each component's ``value``
        (the SWA component keeps SWA pool ids); ``TreeNode``: ``value`` (full ids), the
        SWA ids its live window maps to (``SWARadixCache``), ``mamba_value``."""
        data = getattr(node, "component_data", None)
        if data is not None:
            ct = self.mods.components.ComponentType  # type: ignore[union-attr]
            for pool, kind in (("full", ct.FULL), ("swa", ct.SWA), ("mamba", ct.MAMBA)):
                value = data[kind].value if kind < len(data) else None
                if isinstance(value, torch.Tensor):
                    yield pool, value
            return
        value = getattr(node, "value", None)
        if isinstance(value, torch.Tensor):
            yield "full", value
            if self._swa and not getattr(node, "swa_tombstone", False):
                yield "swa", self.kv.translate_loc_from_full_to_swa(value)
        mamba = getattr(node, "mamba_value", None)
        if isinstance(mamba, torch.Tensor):
            yield "mamba", mamba

    def _full_available(self) -> int:
        available = getattr(self.kv, "full_available_size", None)
        return int(available() if callable(available) else self.kv.available_size())

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {"kv_available": float(self._full_available()),
                                 "req_rows_free": float(self.req_pool.available_size())}
        root = self.root_node
        if root is not None and hasattr(root, "children"):
            nodes = list(walk(root))
            reachable = {id(n) for n in nodes}
            out["tree_nodes"] = float(len(nodes))
            # Locked nodes other than the root (whose lock_ref SGLang keeps at 1).
            out["locked_nodes"] = float(sum(1 for n in nodes[1:] if _locks(n) > 0))
            if self.census is not None:
                held = self._held_by_waiting()
                out["detached_alive_nodes"] = float(sum(
                    1 for n in list(self.census.nodes)
                    if id(n) not in reachable and id(n) not in held and not _sentinel(n)))
        return out

    def _held_by_waiting(self) -> set[int]:
        """Nodes a waiting request's match still names (evicted since, unlocked): alive
        because SGLang's waiting Req holds them, not detached by the cache."""
        held: set[int] = set()
        for sreq in self._waiting.values():
            for attr in ("last_node", "best_match_node", "last_host_node"):
                node = getattr(sreq, attr, None)
                while node is not None and id(node) not in held:
                    held.add(id(node))
                    node = getattr(node, "parent", None)
        return held

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        check: Callable[[], Any] | None = getattr(self.cache, "sanity_check", None)
        if callable(check):
            check()

    def add_note(self, line: str) -> None:
        self._notes.append(line)

    def notes(self) -> list[str]:
        """What this target does not drive on this release, and why (one line each)."""
        out = list(self._notes)
        out.append("lock sites: SGLang locks and unlocks inside its own calls, not through "
                   "this adapter's inc_lock_ref, so a lock leak's report names no call "
                   "site; locked_while_idle and locked_nodes still count the locks")
        if self._abort is not None and self._mamba:  # the handle-based lifecycle (0.5.23)
            out.append("early match: the policy's match_kv_cache forks no Mamba state "
                           "on this release (cow_mamba is the admission match's), so "
                           "waiting requests hold no state slots")
        if self.check_prefetch_progress is None:
            out.append("check_prefetch_progress: this cache has none (no storage tier)")
        if not self._walkable():
            out.append("slot provenance: none on the Rust tree core (its nodes cannot be "
                       "read for the ids the tree holds); the books still judge each pool")
        elif self.page_size > 1:
            out.append("slot provenance: none for paged KV (SGLang allocates its pages "
                       "through alloc_extend, which the slot ledger does not wrap)")
        return out

    def close(self) -> None:
        if self.census is not None:
            self.census.unwatch()


# -------------------------------------------------------------------- building
def build(family: str, options: Mapping[str, Any],
          cls: type[HandleCache] = HandleCache) -> HandleCache:
    """The 0.5.23 cache for a scenario family on CPU pools (the session scenarios' cache:
    ``scenarios/sglang/sessioncache.py``, which builds the Mamba family's with ``cls``)."""
    unified = family != "radix"
    mods = Modules(unified)
    publish_server_args(mods)
    kv_size = int(options.get("kv_size", 8192))
    rows = int(options.get("req_rows", 64))
    context = int(options.get("max_context", 16384))
    page_size = int(options.get("page_size", 1))
    if page_size != 1 and unified:
        raise glue.GlueError("paged KV (page_size > 1) is driven on RadixCache only")
    census = NodeCensus()
    notes: list[str] = []
    if not unified:
        req_pool = mods.memory_pool.ReqToTokenPool(rows, context, "cpu", False)
        kv = (mods.allocator.TokenToKVPoolAllocator(kv_size, torch.float16, "cpu", None, False)
              if page_size == 1 else paged_allocator(mods.allocator, kv_size, page_size))
        params = mods.init_params.CacheInitParams(
            disable=False, req_to_token_pool=req_pool, token_to_kv_pool_allocator=kv,
            page_size=page_size)
        census.watch(mods.radix.TreeNode)
        cache = mods.radix.RadixCache(params)
        return HandleCache(mods, cache, req_pool, family, "RadixCache", census, notes)
    return _build_unified(mods, family, options, kv_size, rows, context, census, notes, cls)


def _build_unified(mods: Modules, family: str, options: Mapping[str, Any], kv_size: int,
                   rows: int, context: int, census: NodeCensus, notes: list[str],
                   cls: type[HandleCache] = HandleCache) -> HandleCache:
    ct = mods.components.ComponentType  # type: ignore[union-attr]
    components = [ct.FULL]  # in the order the Rust core accepts: FULL, SWA, MAMBA
    if family in ("swa", "unified") and options.get("swa_size") is not None:
        components.append(ct.SWA)
    if family in ("mamba", "unified"):
        components.append(ct.MAMBA)
    if family == "unified-full":
        components = [ct.FULL]
    core = str(options.get("tree_core") or os.environ.get(CORE_ENV_VAR) or "python")
    if core not in ("python", "rust"):
        raise glue.GlueError(f"{CORE_ENV_VAR}={core!r}: the tree core is 'python' or 'rust'")
    if ct.MAMBA in components:
        mamba_utils = glue.import_modules(["sglang.srt.configs.mamba_utils"])[0]
        req_pool = hybrid_req_pool(mods.memory_pool, mamba_utils, rows, context,
                                   int(options.get("mamba_size", 48)))
    else:
        req_pool = mods.memory_pool.ReqToTokenPool(rows, context, "cpu", False)
    window: int | None = None
    if ct.SWA in components:
        window = int(options.get("sliding_window", 64))
        kv = _swa_allocator(mods, kv_size, int(options["swa_size"]), req_pool)
    else:
        kv = mods.allocator.TokenToKVPoolAllocator(kv_size, torch.float16, "cpu", None, False)
    if core == "rust" and not compat.takes(mods.init_params.CacheInitParams,
                                           "tree_core_backend"):
        raise glue.GlueError("this release's CacheInitParams has no tree_core_backend: "
                             "its unified cache has one tree core, not a Rust one to pick")
    params = mods.init_params.CacheInitParams(**compat.accepted(
        mods.init_params.CacheInitParams,
        dict(disable=False, req_to_token_pool=req_pool, token_to_kv_pool_allocator=kv,
             page_size=1, tree_components=tuple(components), tree_core_backend=core,
             sliding_window_size=window)))
    if core == "python":
        census.watch(mods.tree_core.UnifiedTreeNode)  # type: ignore[union-attr]
        cache = mods.unified.UnifiedRadixCache(params)  # type: ignore[union-attr]
        kind = f"UnifiedRadixCache[{'+'.join(c.name for c in components)}, python core]"
        return cls(mods, cache, req_pool, family, kind, census, notes)
    cache = mods.unified.UnifiedRadixCache(params)  # type: ignore[union-attr]
    notes.append("Rust tree core: its nodes live in native memory, so tree_nodes and "
                 "detached_alive_nodes are not published; the C heap and RSS see its growth")
    kind = f"UnifiedRadixCache[{'+'.join(c.name for c in components)}, rust core]"
    return cls(mods, cache, req_pool, family, kind, None, notes)


def paged_allocator(allocator_mod: Any, kv_size: int, page_size: int) -> Any:
    """SGLang's ``PagedTokenToKVPoolAllocator`` on CPU, where it allocates through its own
    torch branch (``alloc_extend_naive``/``alloc_decode_naive``, taken when the platform
    cannot launch Triton); a release whose allocator launches its Triton kernels
    unconditionally is refused (``scenarios/sglang/paged.py``)."""
    kv = allocator_mod.PagedTokenToKVPoolAllocator(
        kv_size, page_size, torch.float16, "cpu", None, False)
    if getattr(kv, "use_triton_kernels", True):
        raise glue.GlueError("this release's PagedTokenToKVPoolAllocator launches its "
                             "Triton kernels for extend and decode allocation; no CPU "
                             "path to drive")
    return kv


def hybrid_req_pool(memory_pool: Any, mamba_utils: Any, rows: int, context: int,
                    mamba_size: int) -> Any:
    """SGLang's ``HybridReqToTokenPool`` (from the release's ``memory_pool`` and
    ``mamba_utils`` modules, the same on every release): request rows plus a
    ``MambaPool`` of ``mamba_size`` state slots (one small Mamba2 layer: the cache
    logic never reads the states, only their slot indices), without the extra
    tracking buffer."""
    shape = mamba_utils.Mamba2StateShape.create(
        tp_world_size=1, intermediate_size=16, n_groups=1, num_heads=2, head_dim=8,
        state_size=8, conv_kernel=4)
    params = mamba_utils.Mamba2CacheParams(shape=shape, layers=[0])
    return memory_pool.HybridReqToTokenPool(
        size=rows, mamba_size=mamba_size, mamba_spec_state_size=0, max_context_len=context,
        device="cpu", enable_memory_saver=False, cache_params=params, mamba_layer_ids=[0],
        enable_mamba_extra_buffer=False, enable_overlap_schedule=False)


def _swa_allocator(mods: Modules, kv_size: int, swa_size: int, req_pool: Any) -> Any:
    """SGLang's ``SWATokenToKVPoolAllocator`` over an ``SWAKVPool`` of one full and one
    sliding-window layer (tiny heads: the cache logic moves indices, never reads KV)."""
    swa_pool_mod, swa_alloc_mod = glue.import_modules([
        "sglang.srt.mem_cache.swa_memory_pool", "sglang.srt.mem_cache.allocator.swa"])
    kvcache = swa_pool_mod.SWAKVPool(
        size=kv_size, size_swa=swa_size, page_size=1, dtype=torch.float16, head_num=1,
        head_dim=4, swa_attention_layer_ids=[0], full_attention_layer_ids=[1], device="cpu")
    return swa_alloc_mod.SWATokenToKVPoolAllocator(
        kv_size, swa_size, 1, torch.float16, "cpu", kvcache, False, req_to_token_pool=req_pool)
