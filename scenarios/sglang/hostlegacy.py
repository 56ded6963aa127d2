"""SGLang 0.5.11's and 0.5.17's host tier: ``HiRadixCache`` (and ``HiMambaRadixCache``)
built by their own constructor, driven as those releases' scheduler drives them.

``HiRadixCache(params, server_args)`` builds its host pool (``MHATokenToKVPoolHost``),
its ``HiCacheController`` and, with a storage backend, the controller's storage threads,
over a ``TokenToKVPoolAllocator`` on an ``MHATokenToKVPool`` on CPU. On top of the
``cache_finished_req`` lifecycle of ``legacy.py``, the calls the scheduler makes:

- a waiting request's storage prefetch (``Scheduler._prefetch_kvcache``: the match
  without ``cow_mamba``, then ``prefetch_from_storage(rid, ...)``), once, when the
  harness's scheduler first considers the request or matches it early;
- ``check_prefetch_progress(rid)`` and ``pop_prefetch_loaded_tokens(rid)``;
- admission as ``PrefillAdder.add_one_req``: the match, ``inc_lock_ref`` of the matched
  node for the admission (``_lock_node``), on a host hit ``init_load_back`` and the
  loaded indices appended to the prefix, the request's lock, then
  ``ready_to_load_host_cache()`` before the request's slots;
- ``release_aborted_request(rid)`` for every waiting request that leaves;
- ``check_hicache_events()`` every step.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from refcache.req import Req
from scenarios.sglang import compat, glue, hostglue
from scenarios.sglang.handles import NodeCensus, hybrid_req_pool
from scenarios.sglang.hostbooks import HostTierBooks
from scenarios.sglang.legacy import LegacyCache, LegacyModules, defaults_only, publish_server_args


class HiLegacyCache(HostTierBooks, LegacyCache):
    """0.5.11's / 0.5.17's ``HiRadixCache`` or ``HiMambaRadixCache`` behind the protocol."""

    def __init__(self, *args: Any, storage: hostglue.FileStorage | None, **kwargs: Any) -> None:
        super().__init__(*args, storage=storage, **kwargs)
        self.host_pool = self.cc.mem_pool_host

    # ---------------------------------------------------------------- prefetch
    def _prefetch_once(self, req: Req, sreq: Any) -> None:
        """``Scheduler._prefetch_kvcache``, once per request (SGLang: at queue entry)."""
        if not self._prefetch_due(req, sreq):
            return
        cache = self.cache
        last = sreq.last_host_node
        matched = len(sreq.prefix_indices) + sreq.host_hit_length
        if hasattr(cache, "is_backuped"):  # 0.5.17
            if not (cache.is_backuped(last) or cache.is_root(last)):
                return
            fill = sreq.full_untruncated_fill_ids
            new = fill[matched:sreq._compute_max_prefix_len(len(fill))]
            last_hash = cache.get_last_hash_value(last)
            keys = (cache.get_prefix_hash_values(last)
                    if cache.hicache_storage_pass_prefix_keys else None)
        else:  # 0.5.11
            if not (last.backuped or last is cache.root_node):
                return
            new, last_hash = sreq.fill_ids[matched:], last.get_last_hash_value()
            keys = (last.get_prefix_hash_values(last.parent)
                    if cache.hicache_storage_pass_prefix_keys else None)
        cache.prefetch_from_storage(sreq.rid, last, new, last_hash, keys)

    def check_prefetch_progress(self, req: Req) -> bool:
        sreq = self._sgl(req)
        self._prefetch_once(req, sreq)
        if not self.cache.enable_storage:
            return True
        if not self.cache.check_prefetch_progress(sreq.rid):
            return False
        sreq.storage_hit_length = self.cache.pop_prefetch_loaded_tokens(sreq.rid)
        return True

    def release_aborted_request(self, req: Req) -> None:
        """``Scheduler.abort_request`` for a queued request: the prefetch goes first."""
        if self.cache.enable_storage:
            self.cache.release_aborted_request(f"h{req.rid}")
        super().release_aborted_request(req)

    # ---------------------------------------------------------------- admission
    def alloc_request(self, req: Req) -> bool:
        sreq = self._sgl(req)
        cache = self.cache
        sreq.init_next_round_input(cache)
        total = self._filled(sreq)
        pinned = sreq.last_node
        cache.inc_lock_ref(pinned)  # PrefillAdder._lock_node(req.last_node)
        try:
            fits = (self.req_pool.available_size() >= 1
                    and self._room(total - len(sreq.prefix_indices)))
            if fits:
                if self._host_hit(sreq):
                    self._load_back(sreq, total)
                compat.mark_extend(sreq, len(sreq.prefix_indices), total, refresh=False)
                self._lock(sreq)
        finally:
            cache.dec_lock_ref(pinned)
        rows = None
        if fits:
            cache.ready_to_load_host_cache()  # the new batch's load-backs start
            rows = self._req_rows(sreq)
            if rows is None:
                self._unlock(sreq)
        if rows is None:
            return self._refused(req, sreq)
        return self._fill_rows(req, sreq, len(sreq.prefix_indices), total)

    @staticmethod
    def _host_hit(sreq: Any) -> bool:
        needs = getattr(sreq, "needs_host_load_back", None)  # 0.5.17
        return bool(needs()) if callable(needs) else sreq.host_hit_length > 0

    def _load_back(self, sreq: Any, total: int) -> None:
        """``init_load_back`` as ``add_one_req`` makes it; the loaded slots join the prefix
        (0.5.11's adder also re-sets the extend length, where the Req has the setter)."""
        params = self.mods.base.InitLoadBackParams
        node_field = ("best_match_node" if "best_match_node" in
                      {f.name for f in dataclasses.fields(params)} else "last_host_node")
        node = getattr(sreq, node_field)
        loaded, sreq.last_node = self.cache.init_load_back(params(
            **{node_field: node}, host_hit_length=sreq.host_hit_length, req=sreq))
        sreq.prefix_indices = torch.cat([sreq.prefix_indices, loaded])
        compat.kv_set(sreq, "cache_protected_len", len(sreq.prefix_indices))
        if not compat.has_extend_range(sreq) and callable(
                getattr(sreq, "set_extend_input_len", None)):
            sreq.set_extend_input_len(total - len(sreq.prefix_indices))

    def _held_by_waiting(self) -> set[int]:
        """Also the nodes SGLang's in-flight host-tier records hold (write-through, load
        back, storage backup, a prefetch's anchor): alive for those operations while they
        run, whether still in the tree or not."""
        held = super()._held_by_waiting()
        cache = self.cache
        records = [*cache.ongoing_write_through.values(), *cache.ongoing_load_back.values(),
                   *cache.ongoing_backup.values(), *cache.ongoing_prefetch.values()]
        for record in records:
            node = record[0] if isinstance(record, tuple) else record
            while node is not None and id(node) not in held:
                held.add(id(node))
                node = getattr(node, "parent", None)
        return held

    # ---------------------------------------------------------------- books
    def _kv_values(self, node: Any) -> tuple[Any, Any]:
        return node.value, node.host_value

    def _mamba_values(self, node: Any) -> tuple[Any, Any]:
        return node.mamba_value, node.mamba_host_value

    def _prefetch_staging(self, entry: Any) -> Any:
        # 0.5.11's entries carry the host indices, 0.5.17's keep them in the operation.
        return next((x for x in entry if isinstance(x, torch.Tensor)), None)

    def _mamba_host_pool(self) -> Any:
        return getattr(self.cache, "mamba_pool_host", None)  # HiMamba's host state slots

    def _transfer_nodes(self) -> list[Any]:
        # A node, or 0.5.17's write record (the node its lock is on, length, nodes).
        cache = self.cache
        return [entry[0] if isinstance(entry, tuple) else entry for entry in
                (*cache.ongoing_write_through.values(), *cache.ongoing_load_back.values())]

    def _kv_lock(self, node: Any) -> int:
        """``lock_ref`` (``TreeNode``) or ``full_lock_ref`` (HiMamba's ``TreeNode``, which
        counts Mamba state locks apart)."""
        lock = getattr(node, "lock_ref", None)
        return int(node.full_lock_ref if lock is None else lock)

    def _lock_anchors(self) -> list[Any]:
        cache = self.cache
        return [*cache.ongoing_backup.values(), *self._transfer_nodes(),
                *(entry[0] for entry in list(cache.ongoing_prefetch.values()))]

    def _host_lock(self, node: Any, mamba: bool) -> int:
        """``host_ref_counter`` (``protect_host``/``release_host``), or HiMamba's
        ``host_mamba_ref_counter`` for its state copy."""
        return int(getattr(node, "host_mamba_ref_counter" if mamba else "host_ref_counter", 0))

    def request_tables(self) -> dict[str, list[int]]:
        """SGLang's per-request host-tier tables, by the harness's request ids."""
        cache = self.cache
        tables = {"ongoing_prefetch": cache.ongoing_prefetch,
                  "prefetch_loaded_tokens_by_reqid": cache.prefetch_loaded_tokens_by_reqid}
        return {name: [int(str(rid).lstrip("h")) for rid in list(table)]
                for name, table in tables.items()}

    def notes(self) -> list[str]:
        return [*super().notes(),
                "flush_write_through_acks before decode (an early write ack) is not called: "
                "check_hicache_events acknowledges the writes every step"]


# -------------------------------------------------------------------- building
def build(family: str, options: Mapping[str, Any]) -> HiLegacyCache:
    """``HiRadixCache`` (hiradix) or ``HiMambaRadixCache`` (himamba) with its host tier."""
    mods = LegacyModules()
    publish_server_args(mods)
    host = hostglue.HostOptions.of(options)
    hostglue.single_rank_groups()
    hostglue.bind_copy_kernels()
    hostglue.fill_storage_thread_caches()
    envs = glue.import_modules(["sglang.srt.environ"])[0].envs
    rows, context = int(options.get("req_rows", 64)), int(options.get("max_context", 16384))
    if family == "himamba":
        req_pool = hybrid_req_pool(mods.memory_pool, mods.mamba_utils, rows, context,
                                   int(options.get("mamba_size", 64)))
        module, cls, node_cls = "hi_mamba_radix_cache", "HiMambaRadixCache", mods.mamba.TreeNode
    else:
        req_pool = mods.memory_pool.ReqToTokenPool(rows, context, "cpu", False)
        module, cls, node_cls = "hiradix_cache", "HiRadixCache", mods.radix.TreeNode
    device = hostglue.device_kv(mods.memory_pool, host.kv_size,
                                getattr(req_pool, "mamba_pool", None))
    kv = mods.allocator.TokenToKVPoolAllocator(host.kv_size, torch.float16, "cpu", device, False)
    params = mods.init_params.CacheInitParams(
        disable=False, req_to_token_pool=req_pool, token_to_kv_pool_allocator=kv, page_size=1,
        tp_cache_group=torch.distributed.group.WORLD)
    storage = hostglue.FileStorage() if host.storage_pages else None
    if storage is not None:
        hostglue.warm_page_hash()
    args = defaults_only(mods.server_args.ServerArgs)
    args.model_path, args.device, args.page_size = "leak-harness-no-model", "cpu", 1
    args.hicache_ratio, args.hicache_size = host.ratio, 0
    args.hicache_write_policy, args.hicache_io_backend = host.write_policy, "direct"
    args.hicache_mem_layout = host.layout(family)
    args.hicache_storage_backend = "file" if storage else None
    args.hicache_storage_prefetch_policy = host.prefetch_policy
    args.hicache_storage_backend_extra_config = host.extra_config(storage)
    hi_cls = getattr(glue.import_modules([f"sglang.srt.mem_cache.{module}"])[0], cls)
    census = NodeCensus()
    census.watch(node_cls)
    folder = (envs.SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.override(storage.folder)
              if storage else contextlib.nullcontext())
    try:
        with hostglue.page_lock_stand_in(), folder:
            cache = hi_cls(params, args)
        hostglue.unpin(cache.cache_controller.mem_pool_host,
                       getattr(cache, "token_to_kv_pool_host", None))
        capped = storage is not None and storage.fill(cache.cache_controller.storage_backend,
                                                      host.storage_pages)
    except BaseException:
        census.unwatch()
        if storage is not None:
            storage.close()
        raise
    notes = [*hostglue.DEVICE_NOTES, *host.notes(capped=capped),
             "topology: one gloo rank and SGLang's parallel state at size 1 "
             "(init_distributed_environment, initialize_model_parallel), as a one-GPU "
             "server has them; the TP all-reduces of the event round are over one rank"]
    return HiLegacyCache(mods, cache, req_pool, family, cls, census, notes, storage=storage)
