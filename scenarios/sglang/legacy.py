"""SGLang's caches before the handle-based lifecycle (0.5.11 to 0.5.21).

Before the handle-based API, the scheduler drove requests through the cache's own
``cache_unfinished_req`` and ``sglang.srt.mem_cache.common.release_kv_cache(req,
tree_cache, is_insert)`` (which ends in the cache's ``cache_finished_req``, or from
0.5.21 in ``insert_req`` and ``unpin``). Each family had its own class (``RadixCache``,
``MambaRadixCache``, ``SWARadixCache``, ``UnifiedRadixCache`` with components) until
0.5.21, which runs Mamba and SWA on ``UnifiedRadixCache``. What differs between these
releases (the Req's fields, the lock receipt, ServerArgs) is asked of ``compat.py``.
The calls this adapter makes, all SGLang's own, in its scheduler's order:

- ``alloc_request``: ``Req.init_next_round_input(tree_cache)`` (the admission match;
  a Mamba cache forks the matched state, ``cow_mamba``), ``tree_cache.inc_lock_ref``
  (``PrefillAdder._req_inc_lock_ref``, with the SWA lock uuid), ``alloc_req_slots``,
  ``alloc_token_slots``, ``ReqToTokenPool.write``.
- ``cache_unfinished_req``: ``tree_cache.cache_unfinished_req(req, chunked=True)``.
- ``extend_request``: ``ScheduleBatch._evict_swa`` (SWA caches, past the first decode
  step), ``alloc_token_slots``, ``ReqToTokenPool.write``.
- ``cache_finished_req``: ``release_kv_cache(req, tree_cache)``;
  ``is_insert=False`` (abort, failure, retraction): ``release_kv_cache(req, tree_cache,
  is_insert=False)``, as retraction does.
- ``release_aborted_request``: ``release_kv_cache(req, tree_cache, is_insert=False)``
  when the waiting request holds a Mamba slot (the scheduler's queued-abort path).
- ``match_waiting_req``: the policy's ``_compute_prefix_matches`` match
  (``match_prefix`` without ``cow_mamba``).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from array import array
from collections.abc import Mapping
from typing import Any

import torch

from refcache.req import Req
from scenarios.sglang import compat, glue
from scenarios.sglang.handles import (
    AUX,
    NO_LIMIT,
    HandleCache,
    NodeCensus,
    forget_slots,
    hybrid_req_pool,
)

# Attribute -> the module holding it, first match wins (0.5.11, then 0.5.17 layouts).
LEGACY_MODULES: dict[str, tuple[str, ...]] = {
    "radix": ("sglang.srt.mem_cache.radix_cache",),
    "init_params": ("sglang.srt.mem_cache.cache_init_params",),
    "allocator": ("sglang.srt.mem_cache.allocator",),
    "memory_pool": ("sglang.srt.mem_cache.memory_pool",),
    "batch": ("sglang.srt.managers.schedule_batch",),
    "common": ("sglang.srt.mem_cache.common",),
    # 0.5.11 keeps alloc_req_slots/alloc_token_slots in common, 0.5.17 in allocation
    "allocation": ("sglang.srt.mem_cache.allocation", "sglang.srt.mem_cache.common"),
    "base": ("sglang.srt.mem_cache.base_prefix_cache",),
    "sampling": ("sglang.srt.sampling.sampling_params",),
    "server_args": ("sglang.srt.server_args",),
    "mamba_utils": ("sglang.srt.configs.mamba_utils",),
    "mamba": ("sglang.srt.mem_cache.mamba_radix_cache",),
    "swa": ("sglang.srt.mem_cache.swa_radix_cache",),
    "swa_pool": ("sglang.srt.mem_cache.swa_memory_pool",),
    "unified": ("sglang.srt.mem_cache.unified_radix_cache",),
    "components": ("sglang.srt.mem_cache.unified_cache.component_type",
                   "sglang.srt.mem_cache.unified_cache_components.tree_component"),
    "unified_nodes": ("sglang.srt.mem_cache.unified_cache.unified_tree_core",
                      "sglang.srt.mem_cache.unified_radix_cache"),
}
# Modules of one family's own class, which later releases dropped (0.5.21: Mamba, SWA).
FAMILY_MODULES = ("mamba", "swa")


class LegacyModules:
    """The SGLang modules the adapter calls, imported once through the glue."""

    def __init__(self) -> None:
        import importlib.util

        glue.load()

        def present(name: str) -> bool:
            try:
                return importlib.util.find_spec(name) is not None
            except ModuleNotFoundError:  # its parent package is not in this release
                return False

        for attr, candidates in LEGACY_MODULES.items():
            name = next((n for n in candidates if present(n)), None)
            if name is None and attr in FAMILY_MODULES:  # gone: see compat.own_class
                setattr(self, attr, None)
                continue
            setattr(self, attr, glue.import_modules([name or candidates[-1]])[0])

    def __getattr__(self, attr: str) -> Any:  # the modules set above, for mypy
        raise AttributeError(attr)


_PUBLISHED = False


def publish_server_args(mods: LegacyModules) -> None:
    """``release_kv_cache`` and the Mamba cache read ``get_global_server_args()`` at call
    time (page size, speculative algorithm, ``mamba_cache_chunk_size``): set defaults
    once, as the scheduler process does (``set_global_server_args_for_scheduler``)."""
    global _PUBLISHED
    if _PUBLISHED:
        return
    args = compat.default_server_args(mods.server_args.ServerArgs, defaults_only)
    args.model_path, args.device, args.page_size = "leak-harness-no-model", "cpu", 1
    args._mamba_cache_chunk_size = 64  # pre-seeded as SGLang's fixtures do (0.5.17)
    try:  # the runtime context's bags (installed directly, no resolution) or a global
        compat.server_args_publisher(mods.server_args, compat.runtime_context())(args)
    except LookupError as exc:
        raise glue.GlueError(str(exc)) from None
    _PUBLISHED = True


def defaults_only(cls: type) -> Any:
    """A ``ServerArgs`` holding its fields' defaults, without ``__post_init__``: on these
    releases that resolves the model's config from a hub and probes for an accelerator,
    none of which the cache code reads."""
    args: Any = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            setattr(args, f.name, f.default)
        elif f.default_factory is not dataclasses.MISSING:
            setattr(args, f.name, f.default_factory())
        else:
            setattr(args, f.name, None)
    return args


class LegacyCache(HandleCache):
    """A pre-handle SGLang cache behind the harness's protocol (see the module doc)."""

    # Releases differ in the Req's shape (tokens in lists or arrays, the extend window,
    # where its KV fields live): each difference is a probe of scenarios/sglang/compat.py.
    _arrays: bool | None = None

    def _sgl(self, req: Req) -> Any:
        sreq = req.aux.get(AUX)
        if sreq is None:
            sampling = self.mods.sampling.SamplingParams(max_new_tokens=NO_LIMIT)
            if self._arrays is None:
                self._arrays = compat.tokens_in_arrays(self.mods.batch.Req, sampling)
            tokens = array("q", req.token_ids) if self._arrays else list(req.token_ids)
            sreq = self.mods.batch.Req(f"h{req.rid}", "", tokens, sampling)
            req.aux[AUX] = sreq
        return sreq

    def _filled(self, sreq: Any) -> int:
        return len(getattr(sreq, compat.fill_field(sreq)))

    def _set_lengths(self, sreq: Any, length: int) -> None:
        """Allocated and committed KV, as alloc_for_extend / decode record them."""
        if getattr(sreq, "kv", False) is None:  # a ReqKvInfo made at the first allocation
            sreq.kv = self.mods.batch.ReqKvInfo(kv_allocated_len=length, swa_evicted_seqlen=0)
        compat.kv_set(sreq, "kv_committed_len", length)
        compat.kv_set(sreq, "kv_allocated_len", length)

    def _lock(self, sreq: Any) -> None:
        compat.keep_lock(sreq, self.cache.inc_lock_ref(sreq.last_node), self._swa)

    def _unlock(self, sreq: Any) -> None:
        params = compat.unlock_params(sreq, self.mods.base, self._swa)
        if params is not None:
            self.cache.dec_lock_ref(sreq.last_node, params)
        else:
            self.cache.dec_lock_ref(sreq.last_node)

    def alloc_request(self, req: Req) -> bool:
        sreq = self._sgl(req)
        sreq.init_next_round_input(self.cache)
        total = self._filled(sreq)
        prefix = len(sreq.prefix_indices)
        compat.mark_extend(sreq, prefix, total, refresh=False)  # as PrefillAdder admits it
        self._lock(sreq)
        rows = None
        if self.req_pool.available_size() >= 1 and self._room(total - prefix):
            rows = self._req_rows(sreq)
        if rows is None:
            self._unlock(sreq)
            return self._refused(req, sreq)
        return self._fill_rows(req, sreq, prefix, total)

    def _req_rows(self, sreq: Any) -> Any:
        """The request's row (and Mamba slot), or None on SGLang's own refusal (no Mamba
        slot even after eviction)."""
        try:
            return self.mods.allocation.alloc_req_slots(self.req_pool, [sreq], self.cache)
        except RuntimeError:
            return None

    def _refused(self, req: Req, sreq: Any) -> bool:
        """An admission that did not fit gives back the Mamba slot its match forked, as
        the scheduler's ``release_kv_cache(is_insert=False)`` does; nothing else is held."""
        if compat.kv_get(sreq, "mamba_pool_idx", None) is not None:
            self.mods.common.release_kv_cache(sreq, self.cache, is_insert=False)
        if not getattr(sreq, "is_retracted", False):  # a retracted Req waits as itself
            del req.aux[AUX]
        return False

    def _fill_rows(self, req: Req, sreq: Any, prefix: int, total: int) -> bool:
        """Allocate the tokens past the prefix and write the request's row, as
        ``alloc_for_extend`` does: the row holds the prefix's slots, then the new ones."""
        slots = self.mods.allocation.alloc_token_slots(self.cache, total - prefix)
        idx = compat.kv_get(sreq, "req_pool_idx")
        if prefix:
            self.req_pool.write((idx, slice(0, prefix)), sreq.prefix_indices)
        self.req_pool.write((idx, slice(prefix, total)), slots)
        self._set_lengths(sreq, total)
        self._mirror(req, sreq, total)
        self._waiting.pop(req.rid, None)
        return True

    def _mirror(self, req: Req, sreq: Any, length: int) -> None:
        req.kv_indices = self._row_of(sreq, length)
        req.prefix_len = int(compat.kv_get(sreq, "cache_protected_len"))
        req.last_node = sreq.last_node

    def _row_of(self, sreq: Any, length: int) -> torch.Tensor:
        idx = compat.kv_get(sreq, "req_pool_idx")
        row: torch.Tensor = self.req_pool.req_to_token[idx, :length]
        return row.to(torch.int64)

    def cache_unfinished_req(self, req: Req) -> None:
        sreq = req.aux[AUX]
        committed = compat.kv_get(sreq, "kv_committed_len")
        compat.mark_extend(sreq, compat.kv_get(sreq, "cache_protected_len"), committed,
                           refresh=not compat.has_extend_range(sreq))
        self.cache.cache_unfinished_req(sreq, chunked=True)
        self._mirror(req, sreq, compat.kv_get(sreq, "kv_committed_len"))

    def extend_request(self, req: Req, tokens: list[int],
                       slots: torch.Tensor | None = None) -> bool:
        sreq = req.aux[AUX]
        n = len(tokens)
        if self._swa and sreq.output_ids:
            # ScheduleBatch.maybe_evict_swa in decode: SGLang's own _evict_swa on a batch
            # that holds only what it reads (the cache, its pools).
            batch = types.SimpleNamespace(tree_cache=self.cache, req_to_token_pool=self.req_pool,
                                          token_to_kv_pool_allocator=self.kv)
            self.mods.batch.ScheduleBatch._evict_swa(batch, sreq, sreq.seqlen - 1)
        if slots is None:
            if not self._room(n):
                return False
            slots = self.mods.allocation.alloc_token_slots(self.cache, n)
        start = compat.kv_get(sreq, "kv_committed_len")
        self.req_pool.write((compat.kv_get(sreq, "req_pool_idx"), slice(start, start + n)),
                            slots)
        sreq.output_ids.extend(tokens)
        self._set_lengths(sreq, start + n)
        req.token_ids.extend(tokens)
        req.kv_indices = torch.cat((req.kv_indices, slots.to(torch.int64)))
        return True

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        sreq = req.aux.pop(AUX)
        batch = self.mods.batch
        sreq.finished_reason = (batch.FINISH_LENGTH(length=len(sreq.output_ids)) if is_insert
                                else batch.FINISH_ABORT())
        self.mods.common.release_kv_cache(sreq, self.cache, is_insert=is_insert)
        req.last_node = None

    def retract_request(self, req: Req, remaining: int = 0) -> None:
        """``retract_decode``'s ``release_req``: the same Req is re-queued, reset, with
        the tokens it decoded."""
        self._release_req(req.aux[AUX], remaining, self.req_pool, self.kv, self.cache)
        forget_slots(req)

    def release_aborted_request(self, req: Req) -> None:
        sreq = req.aux.pop(AUX, None)
        self._waiting.pop(req.rid, None)
        if sreq is not None and compat.kv_get(sreq, "mamba_pool_idx", None) is not None:
            self.mods.common.release_kv_cache(sreq, self.cache, is_insert=False)
        req.state_slot = None

    def match_waiting_req(self, req: Req) -> None:
        sreq = self._sgl(req)
        self._waiting[req.rid] = sreq
        result = self.cache.match_prefix(self.mods.base.MatchPrefixParams(
            key=self.mods.radix.RadixKey(sreq.origin_input_ids, sreq.extra_key)))
        sreq.prefix_indices, sreq.last_node = result.device_indices, result.last_device_node
        if compat.kv_get(sreq, "mamba_pool_idx", None) is not None:
            req.state_slot = compat.kv_get(sreq, "mamba_pool_idx", None)

    def match_prefix(self, key: Any) -> Any:
        params = self.mods.base.MatchPrefixParams(
            key=self.mods.radix.RadixKey(list(key.token_ids), key.extra_key))
        return self.cache.match_prefix(params)

    def insert(self, key: Any, value: Any, extra: dict[str, Any] | None = None) -> int:
        params = self.mods.base.InsertParams(
            key=self.mods.radix.RadixKey(list(key.token_ids), key.extra_key), value=value)
        return int(self.cache.insert(params).prefix_len)

    def check_prefetch_progress(self, req: Req) -> bool:
        """0.5.17's ``check_prefetch_progress(rid)`` (the unified cache's storage tier)."""
        return bool(self.cache.check_prefetch_progress(self._sgl(req).rid))

    def inc_lock_ref(self, node: Any) -> None:
        self.cache.inc_lock_ref(node)

    def dec_lock_ref(self, node: Any) -> None:
        self.cache.dec_lock_ref(node)


# -------------------------------------------------------------------- building
def build(family: str, options: Mapping[str, Any]) -> LegacyCache:
    mods = LegacyModules()
    publish_server_args(mods)
    kv_size = int(options.get("kv_size", 8192))
    rows = int(options.get("req_rows", 64))
    context = int(options.get("max_context", 16384))
    if int(options.get("page_size", 1)) != 1:
        from scenarios.sglang import paged

        raise glue.GlueError(paged.NO_CPU_PATH)
    census = NodeCensus()
    mamba = family in ("mamba", "unified")
    swa = family in ("swa", "unified") and options.get("swa_size") is not None
    if mamba:
        req_pool = hybrid_req_pool(mods.memory_pool, mods.mamba_utils, rows, context,
                                   int(options.get("mamba_size", 48)))
    else:
        req_pool = mods.memory_pool.ReqToTokenPool(rows, context, "cpu", False)
    window = int(options.get("sliding_window", 64)) if swa else None
    if swa:
        extra = ({"enable_kvcache_transpose": False}  # 0.5.11 requires it, 0.5.17 refuses it
                 if "enable_kvcache_transpose" in
                 inspect.signature(mods.swa_pool.SWAKVPool.__init__).parameters else {})
        kvcache = mods.swa_pool.SWAKVPool(
            size=kv_size, size_swa=int(options["swa_size"]), page_size=1, dtype=torch.float16,
            head_num=1, head_dim=4, swa_attention_layer_ids=[0], full_attention_layer_ids=[1],
            device="cpu", **extra)
        # 0.5.11 keeps the allocator beside the pool, 0.5.17 in allocator/swa.py
        allocator_cls = getattr(mods.swa_pool, "SWATokenToKVPoolAllocator", None) or \
            glue.import_modules(["sglang.srt.mem_cache.allocator.swa"])[0] \
            .SWATokenToKVPoolAllocator
        kv = allocator_cls(
            kv_size, int(options["swa_size"]), 1, torch.float16, "cpu", kvcache, False)
    else:
        kv = mods.allocator.TokenToKVPoolAllocator(kv_size, torch.float16, "cpu", None, False)
    ct = mods.components.ComponentType
    components: tuple[Any, ...] | None = None
    if family == "unified-full":
        components = (ct.FULL,)
    elif family == "unified":
        components = (ct.FULL, ct.MAMBA, *((ct.SWA,) if swa else ()))
    elif mamba and compat.own_class(mods.mamba, "MambaRadixCache") is None:
        components = (ct.FULL, ct.MAMBA)  # as 0.5.21's scheduler maps a Mamba model
    elif swa and compat.own_class(mods.swa, "SWARadixCache") is None:
        components = (ct.FULL, ct.SWA)
    params = mods.init_params.CacheInitParams(**compat.accepted(
        mods.init_params.CacheInitParams,
        dict(disable=False, req_to_token_pool=req_pool, token_to_kv_pool_allocator=kv,
             page_size=1, sliding_window_size=window, tree_components=components,
             tree_core_backend="python")))  # where it can be picked: nodes to count
    if components is not None:
        census.watch(mods.unified_nodes.UnifiedTreeNode)
        cache = mods.unified.UnifiedRadixCache(params)
        kind = f"UnifiedRadixCache[{'+'.join(c.name for c in components)}]"
    elif mamba:
        census.watch(mods.mamba.TreeNode)
        cache, kind = mods.mamba.MambaRadixCache(params), "MambaRadixCache"
    elif swa:
        census.watch(mods.swa.TreeNode)
        cache, kind = mods.swa.SWARadixCache(params), "SWARadixCache"
    else:
        census.watch(mods.radix.TreeNode)
        cache, kind = mods.radix.RadixCache(params), "RadixCache"
    return LegacyCache(mods, cache, req_pool, family, kind, census)  # type: ignore[arg-type]
