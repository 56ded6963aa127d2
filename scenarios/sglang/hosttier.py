"""SGLang 0.5.23's host tier: ``UnifiedRadixCache`` with HiCache (host pool, cache
controller, storage backend), driven as 0.5.23's scheduler drives it.

The cache is built as the scheduler's registry builds it (``UnifiedRadixCache(params)``
then ``init_hicache(server_args, params)``), over a ``TokenToKVPoolAllocator`` on an
``MHATokenToKVPool`` (HiCache's host pool mirrors the device pool's rows), with the
HiCache settings the scenario asks for in SGLang's runtime context. On top of the
handle-based lifecycle of ``handles.py``, the calls the scheduler makes for HiCache:

- a waiting request's storage prefetch (``Scheduler._prefetch_kvcache``: the match
  without ``cow_mamba``, then ``prefetch_from_storage``), once, when the harness's
  scheduler first considers the request or matches it early;
- ``check_prefetch_progress(handle)`` and ``pop_prefetch_loaded_span(handle)``;
- admission as ``PrefillAdder.add_one_req``: the match, the temporary lock of the
  matched node, on a host hit ``init_load_back`` under a lock and host lock of
  ``best_match_node``, the request's lock, ``finish_storage_prefetch_admission``,
  then ``ready_to_load_host_cache()`` before the request's slots, and the retry set's
  ``cancel`` as for every admitted request;
- ``flush_pending_backups()`` after a batch result (finish, checkpoint);
- ``finish(handle, ABORT)`` for every waiting request that leaves
  (``Scheduler._release_aborted_request``), prefetched or not;
- ``check_hicache_events()`` every step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import torch

from refcache.req import Req
from scenarios.sglang import glue, hostglue
from scenarios.sglang.handles import AUX, HandleCache, Modules, NodeCensus
from scenarios.sglang.hostbooks import PREFETCH_TRIED, HostTierBooks


class HostTierCache(HostTierBooks, HandleCache):
    """0.5.23's ``UnifiedRadixCache`` with its host tier behind the harness's protocol."""

    def __init__(self, *args: Any, storage: hostglue.FileStorage | None, **kwargs: Any) -> None:
        super().__init__(*args, storage=storage, **kwargs)
        self._full = self.mods.components.ComponentType.FULL  # type: ignore[union-attr]

    # ---------------------------------------------------------------- prefetch
    def _prefetch_once(self, req: Req, sreq: Any) -> None:
        """``Scheduler._prefetch_kvcache``, once per request (SGLang: at queue entry)."""
        if not self._prefetch_due(req, sreq):
            return
        cache = self.cache
        last_host = sreq.last_host_node
        matched = sreq.prefix_len + sreq.host_hit_length
        sreq.storage_prefetch_last_match_len = matched
        if not (cache.is_backuped(last_host) or cache.is_root(last_host)):
            return
        fill = sreq.full_untruncated_fill_ids
        end = sreq._compute_max_prefix_len(len(fill))
        prefix_keys = (cache.get_prefix_hash_values(last_host)
                       if cache.hicache_storage_pass_prefix_keys else None)
        cache.prefetch_from_storage(
            sreq.cache_request_handle, last_host, fill[matched:end],
            cache.get_last_hash_value(last_host), prefix_keys,
            matched_prefix_tokens=fill[:matched], extra_key=sreq.extra_key,
            cache_salt=sreq.cache_salt, storage_hit_end=None)

    def check_prefetch_progress(self, req: Req) -> bool:
        sreq = self._sgl(req)
        self._prefetch_once(req, sreq)
        handle = sreq.cache_request_handle
        if not self.cache.check_prefetch_progress(handle):
            return False
        loaded, start = self.cache.pop_prefetch_loaded_span(handle)
        if loaded > 0:
            sreq.storage_hit_length, sreq.storage_hit_start = loaded, start
            sreq.host_hit_is_storage = False
        return True

    def release_aborted_request(self, req: Req) -> None:
        """Every waiting request that leaves gets ``finish(handle, ABORT)``."""
        if req.aux.get(PREFETCH_TRIED):
            self._sgl(req)  # the handle its prefetch is kept under
        super().release_aborted_request(req)

    # ---------------------------------------------------------------- admission
    def alloc_request(self, req: Req) -> bool:
        sreq = self._sgl(req)
        m, cache = self.mods, self.cache
        sreq.init_next_round_input(cache)
        total = len(sreq.full_untruncated_fill_ids)
        sreq.extend_end = total
        need = total - sreq.prefix_len  # new device slots: a host hit's and the rest
        pin = cache.lock(sreq.last_node)  # PrefillAdder._lock_node(req.last_node)
        try:
            fits = (self.req_pool.available_size() >= 1 and self._room(need) and
                    m.allocation.ensure_mamba_capacity(self.req_pool, [sreq], cache))
            if fits:
                if sreq.needs_host_load_back():
                    self._load_back(sreq)
                sreq.lock = cache.lock(sreq.last_node)  # _commit_prefill_admission
        finally:
            cache.unlock(pin)
        if not fits:
            if sreq.kv.holds_mamba:
                m.common.release_kv_cache(sreq, cache, checkpoint=False)
            del req.aux[AUX]
            return False
        self._account_admission(sreq)
        cache.storage_prefetch_retries.cancel(sreq.rid)
        cache.ready_to_load_host_cache()  # the new batch's load-backs start
        m.allocation.alloc_req_slots(self.req_pool, [sreq], cache)
        prefix = cache.prefix_device_indices(sreq) if sreq.prefix_len else None
        slots = m.allocation.alloc_token_slots(cache, total - sreq.prefix_len)
        idx = sreq.kv.req_pool_idx
        if prefix is not None:
            self.req_pool.write((idx, slice(0, sreq.prefix_len)), prefix)
        self.req_pool.write((idx, slice(sreq.prefix_len, total)), slots)
        sreq.kv.kv_allocated_len = sreq.kv.kv_committed_len = total
        cache.maybe_hand_to_session(sreq)
        self._mirror(req, sreq, total)
        self._waiting.pop(req.rid, None)
        return True

    def _load_back(self, sreq: Any) -> None:
        """``init_load_back`` as ``add_one_req`` makes it: the host match pinned (a lock
        and a host lock of ``best_match_node``) until the load owns its locks."""
        cache, best = self.cache, sreq.best_match_node
        host_pin = cache.inc_host_lock_ref(best).to_dec_params()
        try:
            pin = cache.lock(best)
            try:
                loaded = cache.init_load_back(self.mods.base.InitLoadBackParams(
                    best_match_node=best, host_hit_length=sreq.host_hit_length, req=sreq))
            finally:
                cache.unlock(pin)
        finally:
            cache.dec_host_lock_ref(best, host_pin)
        if loaded is None:  # buffer mode only
            return
        sreq.host_loaded_length, sreq.last_node = loaded
        sreq.prefix_len += sreq.host_loaded_length
        if cache.load_back_is_cache_owned():
            sreq.kv.cache_protected_len = sreq.prefix_len

    def _account_admission(self, sreq: Any) -> None:
        """``PrefillAdder._account_prefill_cache_admission``: the storage hit's books."""
        handle, cache = sreq.cache_request_handle, self.cache
        if sreq.retracted_stain:
            cache.discard_storage_prefetch_accounting(handle)
            cache.finish_storage_prefetch_admission(handle, fulfilled_tokens=0, reason=None)
            return
        fulfilled = sreq.fulfilled_storage_hit_len(sreq.prefix_len)
        reason = None
        if fulfilled < sreq.storage_hit_length:
            reason = ("device_capacity" if sreq.needs_host_load_back()
                      and sreq.host_loaded_length < sreq.host_hit_length
                      else "cache_admission_shortfall")
        cache.finish_storage_prefetch_admission(handle, fulfilled_tokens=fulfilled,
                                                reason=reason)

    # ---------------------------------------------------------------- batch results
    def cache_unfinished_req(self, req: Req) -> None:
        super().cache_unfinished_req(req)
        self.cache.flush_pending_backups()

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        super().cache_finished_req(req, is_insert)
        self.cache.flush_pending_backups()

    # ---------------------------------------------------------------- books
    def _kv_values(self, node: Any) -> tuple[Any, Any]:
        data = node.component_data[self._full]
        return data.value, data.host_value

    def _mamba_values(self, node: Any) -> tuple[Any, Any]:
        data = node.component_data[self.mods.components.ComponentType.MAMBA]  # type: ignore[union-attr]
        return data.value, data.host_value

    def _prefetch_staging(self, entry: Any) -> Any:
        return entry.host_indices

    def _mamba_host_pool(self) -> Any:
        mamba = self.mods.components.ComponentType.MAMBA  # type: ignore[union-attr]
        if mamba not in self.cache.components:
            return None
        for entry in self.cache.host_pool_group.entries:
            if str(getattr(entry.name, "value", entry.name)) == "mamba":
                return entry.host_pool
        return None

    def _transfer_nodes(self) -> list[Any]:
        ops = [*self.cache.ongoing_write_through.values(), *self.cache.ongoing_load_back.values()]
        return [self.cache.resolve_node_handle(op.node_id) for op in ops]

    def _kv_lock(self, node: Any) -> int:
        return int(node.component_data[self._full].lock_ref)

    def _lock_anchors(self) -> list[Any]:
        cache = self.cache
        ids = [node_id for node_id, _ in list(cache.ongoing_backup.values())]
        ids += [info.anchor_node_id for info in list(cache.ongoing_prefetch.values())]
        ids += [op.node_id for op in (*cache.ongoing_load_back.values(),
                                      *cache.ongoing_write_through.values())]
        return [node for node in map(self._node_or_none, ids) if node is not None]

    def _node_or_none(self, node_id: Any) -> Any:
        """The node of an id, or None once the tree has deleted it."""
        try:
            return self.cache.resolve_node_handle(node_id)
        except LookupError:
            return None

    def _host_lock(self, node: Any, mamba: bool) -> int:
        kind = self.mods.components.ComponentType.MAMBA if mamba else self._full  # type: ignore[union-attr]
        return int(node.component_data[kind].host_lock_ref)

    def request_tables(self) -> dict[str, list[int]]:
        """SGLang's per-request host-tier tables, by the harness's request ids."""
        cache = self.cache
        tables = {
            "ongoing_prefetch": cache.ongoing_prefetch,
            "prefetch_loaded_tokens_by_reqid": cache.prefetch_loaded_tokens_by_reqid,
            "prefetch_loaded_storage_start_by_reqid":
                cache.prefetch_loaded_storage_start_by_reqid,
            "_storage_prefetch_hit_remaining_by_reqid":
                cache._storage_prefetch_hit_remaining_by_reqid,
            "_storage_prefetch_wait": cache._storage_prefetch_wait,
            "storage_prefetch_retries": cache.storage_prefetch_retries._pending,
        }
        return {name: [_rid(key) for key in list(table)] for name, table in tables.items()}

    def notes(self) -> list[str]:
        out = super().notes()
        out.append("storage prefetch retries: the scheduler's re-issue of a rate-limited or "
                   "missed lookup (_process_storage_prefetch_retries) and its re-query when "
                   "the device prefix shrank while queued are not made; the retry set is "
                   "cancelled on admission and abort as SGLang does")
        return out


def _rid(key: Any) -> int:
    """The harness's request id from SGLang's (``h<rid>`` or a handle of it)."""
    rid = getattr(key, "rid", key)
    return int(str(rid).lstrip("h"))


# -------------------------------------------------------------------- building
def build(family: str, options: Mapping[str, Any]) -> HostTierCache:
    """``UnifiedRadixCache`` with FULL (hiradix) or FULL+MAMBA (himamba) and HiCache."""
    mods = Modules(True)
    from scenarios.sglang.handles import hybrid_req_pool, publish_server_args

    publish_server_args(mods)
    if int(options.get("page_size", 1)) != 1:
        raise glue.GlueError("the host tier is driven at page_size 1 only")
    host = hostglue.HostOptions.of(options)
    context, envs = (m for m in glue.import_modules(
        ["sglang.srt.runtime_context", "sglang.srt.environ"]))
    hostglue.rank_zero(context)
    hostglue.bind_copy_kernels()
    hostglue.fill_storage_thread_caches()
    rows, max_context = int(options.get("req_rows", 64)), int(options.get("max_context", 16384))
    ct = mods.components.ComponentType  # type: ignore[union-attr]
    components: tuple[Any, ...] = (ct.FULL,)
    if family == "himamba":
        mamba_utils = glue.import_modules(["sglang.srt.configs.mamba_utils"])[0]
        req_pool = hybrid_req_pool(mods.memory_pool, mamba_utils, rows, max_context,
                                   int(options.get("mamba_size", 64)))
        components = (ct.FULL, ct.MAMBA)
    else:
        req_pool = mods.memory_pool.ReqToTokenPool(rows, max_context, "cpu", False)
    device = hostglue.device_kv(mods.memory_pool, host.kv_size,
                                getattr(req_pool, "mamba_pool", None))
    kv = mods.allocator.TokenToKVPoolAllocator(host.kv_size, torch.float16, "cpu", device, False)
    params = mods.init_params.CacheInitParams(
        disable=False, req_to_token_pool=req_pool, token_to_kv_pool_allocator=kv, page_size=1,
        tree_components=components, tree_core_backend="python")
    census = NodeCensus()
    census.watch(mods.tree_core.UnifiedTreeNode)  # type: ignore[union-attr]
    cache = mods.unified.UnifiedRadixCache(params)  # type: ignore[union-attr]
    storage = hostglue.FileStorage() if host.storage_pages else None
    if storage is not None:
        hostglue.warm_page_hash()
    settings = dict(
        hicache_ratio=host.ratio, hicache_size=0, hicache_write_policy=host.write_policy,
        hicache_io_backend="direct", hicache_mem_layout=host.layout(family),
        hicache_storage_backend="file" if storage else None,
        hicache_storage_prefetch_policy=host.prefetch_policy,
        hicache_storage_backend_extra_config=host.extra_config(storage))
    folder = (envs.envs.SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.override(storage.folder)
              if storage else contextlib.nullcontext())
    try:
        with context.get_memory().override(**settings), hostglue.page_lock_stand_in(), folder:
            cache.init_hicache(context.get_server_args(), params)
        controller = cache.cache_controller
        hostglue.unpin(controller.mem_pool_host, getattr(controller, "storage_host_pool", None))
        capped = storage is not None and storage.fill(controller.storage_backend,
                                                      host.storage_pages)
    except BaseException:
        if storage is not None:
            storage.close()
        raise
    kind = f"UnifiedRadixCache[{'+'.join(c.name for c in components)}, python core] + HiCache"
    notes = [*hostglue.DEVICE_NOTES, *host.notes(capped=capped),
             "the host tier runs on the Python tree core (its host copies are counted "
             "from its nodes)"]
    return HostTierCache(mods, cache, req_pool, family, kind, census, notes, storage=storage)
