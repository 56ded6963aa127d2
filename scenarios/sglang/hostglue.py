"""What SGLang's host tier (HiCache) needs on a CPU besides the import glue, and how
the host-tier scenarios' options map onto SGLang's HiCache settings.

Each piece replaces a device mechanism only, or states what a one-process server
sets up; the cache logic (tree, controller, host pool, storage backend and its
threads) runs as released. :data:`DEVICE_NOTES` says the same in every host-tier
cache's notes:

- **Page-locking** (:func:`page_lock_stand_in`, :func:`unpin`): the host pools register
  their buffer with the CUDA driver (``torch.cuda.cudart().cudaHostRegister``) for DMA.
  There is no driver here: while a cache is built, ``torch.cuda.cudart()`` answers with
  an object whose register/unregister succeed doing nothing, and after the build each
  host pool's ``pin_memory`` is False, so its later host allocations (the storage
  backend's dummy pages) are pageable too; torch cannot pin without an accelerator.
- **Copy kernels** (:func:`bind_copy_kernels`): the KV copies between device and host
  buffers are sgl_kernel's ``transfer_kv_*``. 0.5.11 imports them on a CPU too (the
  glue's inert stand-ins answer); 0.5.17's and 0.5.23's host pools import them only on
  CUDA/HIP and name them unbound: they are bound to the same stand-ins. No KV bytes
  move; indices, allocations, queues and acknowledgements are SGLang's.
- **Streams and events**: nothing replaced. SGLang takes its device module from torch
  (``torch.get_device_module()``), ``torch.cpu`` on a CPU build, whose ``Event`` is
  complete once recorded: a copy's acknowledgement is read at the next event round.
- **Topology**: 0.5.11 and 0.5.17 read the TP world size from ``torch.distributed``
  and the TP rank from SGLang's parallel state (:func:`single_rank_groups`: one gloo
  rank over a file store, SGLang's ``init_distributed_environment`` and
  ``initialize_model_parallel`` at size 1); 0.5.23 reads ranks from its runtime
  context (:func:`rank_zero`: world rank 0 placed as ``publish(ranks=...)`` does).
- **Measurement** (:func:`fill_storage_thread_caches`): SGLang's storage threads fill
  their glibc tcache as they start, as the harness's own sampler thread does.
- **Storage** (:class:`FileStorage`): SGLang's file backend (``HiCacheFile``) in a
  folder of its own, removed on close; its page hash is built before the first request
  (:func:`warm_page_hash`: 0.5.17 and 0.5.23 compile a native hash on first use).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from scenarios.sglang import compat, glue

# The device KV pool's rows: one layer, one head of 4 fp16 values (K and V: 16 bytes a
# token); the cache logic moves indices and never reads KV.
HEADS, HEAD_DIM, LAYERS = 1, 4, 1
TOKEN_BYTES = 2 * LAYERS * HEADS * HEAD_DIM * torch.float16.itemsize
# Host-pool modules whose KV copy kernels are imported only on CUDA/HIP (0.5.17, 0.5.23;
# 0.5.11's memory_pool_host.py imports them unconditionally: nothing to bind there),
# and the kernels they import from sgl_kernel.kvcacheio (read in their sources: the
# union over 0.5.17 and 0.5.23; transfer_kv_dim_exchange is the NPU's).
HOST_POOL_MODULES = tuple(f"sglang.srt.mem_cache.{leaf}" for leaf in (
    "memory_pool_host", "pool_host.mha", "pool_host.mla", "pool_host.mamba", "pool_host.dsa"))
KVCACHEIO = "sgl_kernel.kvcacheio"
KERNELS = (
    "transfer_kv_all_layer", "transfer_kv_all_layer_direct_lf_pf",
    "transfer_kv_all_layer_lf_pf",
    "transfer_kv_all_layer_lf_ph", "transfer_kv_all_layer_mla", "transfer_kv_all_layer_mla_lf_pf",
    "transfer_kv_direct", "transfer_kv_mamba_lf_pf", "transfer_kv_mamba_pf_lf",
    "transfer_kv_per_layer", "transfer_kv_per_layer_direct_pf_lf", "transfer_kv_per_layer_mla",
    "transfer_kv_per_layer_mla_pf_lf", "transfer_kv_per_layer_pf_lf",
    "transfer_kv_per_layer_ph_lf",
)
DEVICE_NOTES = (
    "host tier, device mechanisms only: host memory is not page-locked (no CUDA driver: "
    "torch.cuda.cudart() answers cudaHostRegister with success while the cache is built, "
    "and the host pools' pin_memory is False afterwards); sgl_kernel's KV copy kernels "
    "are the glue's inert stand-ins, so write-through and load back move indices and "
    "acknowledgements but no KV bytes; streams and events are torch.cpu's (an event is "
    "complete once recorded)",
)


class _NoDriver:
    """``torch.cuda.cudart()`` on a machine without CUDA: nothing to page-lock."""

    def cudaHostRegister(self, ptr: int, size: int, flags: int) -> int:
        return 0

    def cudaHostUnregister(self, ptr: int) -> int:
        return 0

    def cudaGetErrorString(self, rc: int) -> str:
        return "no CUDA driver"


@contextlib.contextmanager
def page_lock_stand_in() -> Iterator[None]:
    """While SGLang builds its host pools: page-locking is a no-op (see the module doc)."""
    if torch.cuda.is_available():
        yield
        return
    original = torch.cuda.cudart
    torch.cuda.cudart = lambda: _NoDriver()
    try:
        yield
    finally:
        torch.cuda.cudart = original


def unpin(*pools: Any) -> None:
    """After the build: the host pools' ``pin_memory`` says what their buffers are here,
    not pinned, so SGLang's later host allocations (the storage backend's dummy pages)
    are made pageable; torch refuses ``pin_memory=True`` without an accelerator.
    ``pools``: host pools, or groups of them (``entries`` of ``host_pool``)."""
    for pool in pools:
        for entry in getattr(pool, "entries", ()) or ():
            unpin(getattr(entry, "host_pool", None))
        if pool is not None and getattr(pool, "pin_memory", False) and \
                not torch.cuda.is_available():
            pool.pin_memory = False


def bind_copy_kernels() -> list[str]:
    """Bind the copy kernels a host-pool module imports only on CUDA/HIP, and so names
    unbound here, to the glue's stand-ins; the names bound (none with a real sgl_kernel)."""
    if "sgl_kernel" not in glue.stand_ins_used():
        return []
    kernels = importlib.import_module(KVCACHEIO)
    bound = []
    for name in HOST_POOL_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue  # not in this release (0.5.11 has memory_pool_host.py only)
        for kernel in KERNELS:
            if not hasattr(module, kernel):
                setattr(module, kernel, getattr(kernels, kernel))
                bound.append(f"{name.rpartition('mem_cache.')[2]}.{kernel}")
    return bound


_GROUPS: str | None = None


def single_rank_groups() -> None:
    """One gloo rank and SGLang's parallel state at size 1, once per process (0.5.11 and
    0.5.17 read the TP world size and rank through them, as a one-GPU server has them)."""
    global _GROUPS
    if _GROUPS is not None:
        return
    # initialize_model_parallel imports the sampler, whose @torch.compile needs the glue.
    state, _sampler = glue.import_modules(["sglang.srt.distributed.parallel_state",
                                           "sglang.srt.layers.sampler"])
    folder = tempfile.mkdtemp(prefix="leak-harness-gloo-")
    atexit.register(shutil.rmtree, folder, True)
    state.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                       distributed_init_method=f"file://{folder}/store")
    if not state.model_parallel_is_initialized():
        state.initialize_model_parallel(1, backend="gloo")
    _GROUPS = folder


def rank_zero(context: Any) -> None:
    """0.5.23: this process is world rank 0 of a one-rank launch, written into the
    runtime context with SGLang's own placement (``derive_spawn_ranks``), as
    ``publish(server_args, ranks=SpawnRanks(world_rank=0))`` writes it."""
    parallel = context.get_parallel()
    try:
        parallel.tp_rank  # noqa: B018 (placed already: reading raises until written)
        return
    except RuntimeError:
        pass
    placement = context.derive_spawn_ranks(
        world_rank=0, tp_size=parallel.tp_size, ep_join_rank_offset=parallel.ep_join_rank_offset,
        attn_cp_size=parallel.attn_cp_size, attn_tp_size=parallel.attn_tp_size,
        moe_dp_size=parallel.moe_dp_size, moe_ep_size=parallel.moe_ep_size)
    if parallel.moe_dp_size < parallel.attn_cp_size:
        placement["moe_dp_rank"] = placement["attn_cp_rank"]
    placement.update(dp_rank=None, launch_world_rank=0, attn_dcp_rank=0)
    placement.update(context._attention_ranks(parallel, placement["tp_rank"]))
    parallel.override_permanently(**placement)


def device_kv(memory_pool: Any, kv_size: int, mamba_pool: Any = None) -> Any:
    """SGLang's device KV pool the host pool mirrors: ``MHATokenToKVPool``, or beside a
    ``MambaPool`` the hybrid model's ``HybridLinearKVPool`` (one full-attention layer,
    id 1, next to the Mamba layer 0 of ``handles.hybrid_req_pool``), which HiMamba and
    0.5.23's Mamba host tier require."""
    if mamba_pool is None:
        return memory_pool.MHATokenToKVPool(kv_size, 1, torch.float16, HEADS, HEAD_DIM, LAYERS,
                                            "cpu", False)
    cls = memory_pool.HybridLinearKVPool
    return cls(**compat.accepted(cls.__init__, dict(
        size=kv_size, dtype=torch.float16, page_size=1, head_num=HEADS, head_dim=HEAD_DIM,
        full_attention_layer_ids=[1], enable_kvcache_transpose=False, device="cpu",
        mamba_pool=mamba_pool, enable_memory_saver=False)))


# The storage threads' functions of SGLang's cache controllers (0.5.11-0.5.23).
# A page-hash build takes ~20 s here: a build lock this old was left by a killed build.
STALE_BUILD_LOCK_S = 120.0
STORAGE_THREADS = ("prefetch_thread_func", "prefetch_io_aux_func", "backup_thread_func",
                   "prefetch_sync_thread_func")
CONTROLLER_MODULES = ("sglang.srt.managers.cache_controller",
                      "sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller")


def fill_storage_thread_caches() -> None:
    """Each storage thread SGLang's controller starts fills its glibc tcache first
    (``harness.worker.glibc.fill_thread_cache``), as the harness does for its own sampler
    thread: ``mallinfo2`` counts a thread's cached free chunks as in use, and three or
    four storage threads filling theirs over a run's first ~20 s read as heap growth
    (~0.3 MB measured; flat with ``GLIBC_TUNABLES=glibc.malloc.tcache_count=0``). Wraps
    the controllers' thread functions once per process; what they do is unchanged."""
    from harness.worker.glibc import fill_thread_cache

    for name in CONTROLLER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        for cls in vars(module).values():
            if not (isinstance(cls, type) and cls.__module__ == name):
                continue
            for attr in STORAGE_THREADS:
                function = cls.__dict__.get(attr)
                if function is None or getattr(function, "_fills_tcache", False):
                    continue

                def run(self: Any, *args: Any, _function: Any = function, **kwargs: Any) -> Any:
                    fill_thread_cache()
                    return _function(self, *args, **kwargs)

                run._fills_tcache = True  # type: ignore[attr-defined]
                setattr(cls, attr, run)


def warm_page_hash() -> None:
    """Hash one page with SGLang's page hash before any request runs. 0.5.17 and 0.5.23
    compile it on first use (``cpp_utils/native_hash.py``: torch's JIT loader, g++ and
    OpenSSL, about 20 s here) under one name on both releases; each release under
    ``.sglang/`` builds into a folder of its own (``TORCH_EXTENSIONS_DIR``), so switching
    releases does not rebuild it, and the first build happens here, not in a request's
    insert. A build killed midway leaves a ``lock`` file in that folder that makes the
    next build wait for ever: remove it."""
    release = glue.load()
    if release.site is not None:
        folder = release.site.parent / "torch_extensions"
        inherited = os.environ.get("TORCH_EXTENSIONS_DIR")
        # A folder set by a process that ran another release under .sglang/ is not ours.
        if inherited is None or Path(inherited).parent.parent == release.site.parent.parent:
            os.environ["TORCH_EXTENSIONS_DIR"] = str(folder)
        remove_stale_locks(Path(os.environ["TORCH_EXTENSIONS_DIR"]))
    utils = glue.import_modules(["sglang.srt.mem_cache.utils"])[0]
    utils.get_hash_str([1])


def remove_stale_locks(folder: Path, older_than_s: float = STALE_BUILD_LOCK_S) -> list[Path]:
    """Remove the build locks under ``folder`` no build can still hold: torch's loader
    waits for ever on a lock a killed build left (a build takes ~20 s here)."""
    removed = []
    for lock in folder.glob("*/lock"):
        with contextlib.suppress(FileNotFoundError):
            if time.time() - lock.stat().st_mtime > older_than_s:
                lock.unlink()
                removed.append(lock)
    return removed


class FileStorage:
    """SGLang's file storage backend's folder, made for one cache and removed on close."""

    # Placeholder pages written per page of capacity: past full, the evictor turns its
    # index over (it frees 10% at a time), which grows it to the size it keeps from then
    # on (measured: ~1 MB more than just full, over a run's first seconds otherwise).
    TURNOVER = 1.5


    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="leak-harness-hicache-")

    def fill(self, backend: Any, pages: int) -> bool:
        """Start the store full and turned over, as a long-running server's is:
        placeholder pages, named as ``HiCacheFile`` names its pages and registered with
        its own LRU file evictor (``reserve``/``commit``, which evicts the oldest past
        ``pages``), so the evictor's index (a key and size a page) is at the size it
        keeps before the run and new pages evict placeholders first. False when the
        backend keeps no such index (0.5.11: no size cap)."""
        evictor = getattr(backend, "_evictor", None)
        suffixed = getattr(backend, "_get_suffixed_key", None)
        if evictor is None or not callable(suffixed) or not evictor.enabled:
            return False
        for i in range(int(pages * self.TURNOVER)):
            # Keys shaped as SGLang's (64 hex digits, so a page replacing one moves no
            # memory), zero-led as no SHA-256 of a page is: never a prefetch hit. No file
            # is written: evicting an entry whose file is gone is the evictor's own case
            # (it drops the entry and its bytes: "file already gone").
            key = suffixed(f"{i:064x}")
            if not evictor.reserve(key, TOKEN_BYTES):
                break
            evictor.commit(key)
        return True

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# Options of the reference's host-tier factories that SGLang has no setting for.
NOT_MAPPED = {
    "prefetch_ticks": "SGLang's prefetch runs on its own storage threads, not in event rounds",
    "prefetch_timeout": "SGLang's timeout policy counts seconds (its default base and rate)",
    "prefetch_capacity": "SGLang sizes its prefetch limit itself (80% of host beyond device)",
    "load_back_threshold": "SGLang's is fixed at 10 tokens",
    "latency_ticks": "copies complete when their torch.cpu event is read",
    "mamba_host_size": "SGLang sizes the host Mamba pool from the host KV ratio",
}


@dataclasses.dataclass(frozen=True)
class HostOptions:
    """A host-tier scenario's cache options in SGLang's terms."""

    kv_size: int
    host_size: int
    write_policy: str  # write_through (1 hit) or write_through_selective (2 hits)
    storage_pages: int  # 0: no storage tier
    prefetch_threshold: int
    prefetch_policy: str
    not_mapped: tuple[str, ...]

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> HostOptions:
        kv = int(options.get("kv_size", 8192))
        threshold = int(options.get("write_through_threshold", 2))
        return cls(
            kv, int(options.get("host_size", 2 * kv)),
            "write_through" if threshold <= 1 else "write_through_selective",
            int(options.get("storage_pages", 0) or 0),
            int(options.get("prefetch_threshold", 1)),
            str(options.get("prefetch_policy", "wait_complete")),
            tuple(f"{name}: {why}" for name, why in NOT_MAPPED.items() if name in options))

    @staticmethod
    def layout(family: str) -> str:
        """``hicache_mem_layout`` with the ``direct`` IO backend: ``layer_first`` (what
        SGLang's own HiRadixCache test runs); with Mamba ``page_first_direct``, which
        0.5.17's ``MambaPoolHost`` requires and SGLang's server makes of page_first +
        direct."""
        return "page_first_direct" if family == "himamba" else "layer_first"

    @property
    def ratio(self) -> float:
        """SGLang sizes the host pool as the device pool times ``hicache_ratio``."""
        return self.host_size / self.kv_size

    def extra_config(self, storage: FileStorage | None) -> str | None:
        """``hicache_storage_backend_extra_config``: the prefetch threshold, the file
        backend's folder (0.5.23 reads it here; older releases from SGLang's variable)
        and its size cap (``max_size``, where the release's file backend has one)."""
        if storage is None:
            return None
        return json.dumps({"prefetch_threshold": self.prefetch_threshold,
                           "file_storage_path": storage.folder,
                           "max_size": self.storage_pages * TOKEN_BYTES})

    def notes(self, capped: bool) -> list[str]:
        out = [f"host tier: {self.write_policy} write policy, host pool {self.ratio:g}x the "
               f"device pool (SGLang's hicache_ratio)"]
        if self.storage_pages:
            cap = (f"capped at {self.storage_pages} pages (max_size) and started full of "
                   f"placeholder pages no request asks for, registered with SGLang's LRU "
                   f"file evictor, as a long-running server's store is full (its index, "
                   f"~150 B a page, would otherwise fill for the first ~20 s of a run)"
                   if capped else "unbounded (this release's file backend has no size cap)")
            out.append(f"storage tier: SGLang's file backend (HiCacheFile) in a temp folder "
                       f"removed on close, {cap}; prefetch policy {self.prefetch_policy}, "
                       f"threshold {self.prefetch_threshold} tokens; a request's prefetch "
                       f"starts when the scheduler first considers it (SGLang: at arrival)")
        else:
            out.append("storage tier: none (the scenario has none)")
        out.extend(f"not mapped: {line}" for line in self.not_mapped)
        return out
