"""One factory per cache class: what scenarios (and ``--target`` users) call.

Every factory takes ``inject`` (names from ``refcache.regressions``; empty is the
fixed code) and keyword options for pool sizes and shapes, and returns a cache
speaking the protocol in ``scenarios/workloads/protocol.py``. Factories for
caches that live elsewhere in the package import them lazily, so importing this
module stays cheap. The PP-capable caches (HiRadix, Unified) start a local gloo
pipeline when ``pp_world_size > 1``; the cache's ``close()`` then stops it.

Shared options:

- ``inject``: regressions to switch on, e.g. ``("hiradix-pp-sync-no-drain",)``.
- ``kv_size``: device KV pool size in tokens.
- ``page_size``: tokens per page; keys and matches are cut to whole pages.
- ``mamba_size``: device Mamba state slots (one per cached sequence end or request).
- ``conv_shape`` / ``ssm_shape``: shape of one Mamba conv / ssm state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from refcache.disagg import DecodeCache, PrefillCache
from refcache.himamba import HiMambaRadixCache
from refcache.hiradix import HiRadixCache
from refcache.mamba import MambaRadixCache
from refcache.pools import HostPool, SlotAllocator, StatePool
from refcache.pp_sync import Pipeline, start_pipeline
from refcache.radix import RadixCache
from refcache.storage import StorageTier

CONV_SHAPE = (2, 16)
SSM_SHAPE = (16, 16)


def radix_cache(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1) -> RadixCache:
    """The plain prefix cache (no regressions of its own; the control)."""
    return RadixCache(SlotAllocator(kv_size), page_size, tuple(inject))


def mamba_cache(
    inject: Sequence[str] = (),
    kv_size: int = 16384,
    mamba_size: int = 48,
    page_size: int = 1,
    conv_shape: tuple[int, ...] = CONV_SHAPE,
    ssm_shape: tuple[int, ...] = SSM_SHAPE,
    streaming_sessions: bool = False,
) -> MambaRadixCache:
    """MambaRadixCache (incident 1 as ``mamba-lru-unlink``); ``streaming_sessions``
    adds SGLang's streaming sessions (``refcache.sessions``, incident 11)."""
    states = StatePool(mamba_size, tuple(conv_shape), tuple(ssm_shape))
    cls = MambaRadixCache
    if streaming_sessions:
        from refcache.sessions import SessionMambaRadixCache as cls
    return cls(SlotAllocator(kv_size), states, page_size, tuple(inject))


def swa_cache(
    inject: Sequence[str] = (),
    kv_size: int = 16384,
    swa_size: int = 2048,
    sliding_window: int = 64,
    page_size: int = 1,
    eagle: bool = False,
    free_out_of_window: bool = False,
) -> Any:
    """SWARadixCache (incident 1 as ``swa-lru-unlink``, 14 as ``swa-eagle-frontier``).

    ``swa_size``: SWA KV pool size in tokens; ``sliding_window``: tokens the SWA
    layers attend over (a match must end with that many SWA-resident tokens);
    ``eagle``: bigram keys (EAGLE speculative decoding); ``free_out_of_window``: an
    unfinished request's SWA that slid out of its window is freed before its insert.
    """
    from refcache.swa import SWARadixCache

    swa = SlotAllocator(swa_size, "swa")
    return SWARadixCache(SlotAllocator(kv_size), swa, sliding_window, page_size, tuple(inject),
                         eagle=eagle, free_out_of_window=free_out_of_window)


def unified_cache(
    inject: Sequence[str] = (),
    kv_size: int = 16384,
    mamba_size: int | None = None,
    swa_size: int | None = None,
    sliding_window: int | None = None,
    page_size: int = 1,
    conv_shape: tuple[int, ...] = CONV_SHAPE,
    ssm_shape: tuple[int, ...] = SSM_SHAPE,
    pp_world_size: int = 1,
    pp_lag_s: float = 0.05,
    pp_payload: int = 1,
    pp_timeout_s: float = 60.0,
    streaming_sessions: bool = False,
    eagle: bool = False,
    free_out_of_window: bool = False,
) -> Any:
    """UnifiedRadixCache with the components given a size (incidents 1, 3 and 14).

    ``mamba_size`` adds a Mamba component, ``swa_size`` (with ``sliding_window``)
    an SWA component; PP options as for :func:`hiradix_cache`;
    ``streaming_sessions`` adds SGLang's streaming sessions (``refcache.sessions``);
    ``eagle`` and ``free_out_of_window`` as for :func:`swa_cache` (bigram keys only
    without Mamba).
    """
    from refcache.sessions import SessionUnifiedRadixCache
    from refcache.unified import UnifiedRadixCache

    cls = SessionUnifiedRadixCache if streaming_sessions else UnifiedRadixCache

    kv = SlotAllocator(kv_size)
    components: dict[str, SlotAllocator] = {"full": kv}
    if mamba_size is not None:
        components["mamba"] = StatePool(mamba_size, tuple(conv_shape), tuple(ssm_shape))
    if swa_size is not None:
        components["swa"] = SlotAllocator(swa_size, "swa")
    pipeline = _pipeline(pp_world_size, pp_lag_s, pp_payload, pp_timeout_s)

    def build(pp: Any) -> Any:
        return cls(kv, components, page_size, tuple(inject), pp, sliding_window, pp_payload,
                   eagle=eagle, free_out_of_window=free_out_of_window)

    return _with_pipeline(build, pipeline)


def hiradix_cache(
    inject: Sequence[str] = (),
    kv_size: int = 8192,
    host_size: int = 16384,
    page_size: int = 1,
    write_through_threshold: int = 2,
    load_back_threshold: int = 2,
    latency_ticks: int = 2,
    kv_row_elems: int = 8,
    pp_world_size: int = 1,
    pp_lag_s: float = 0.05,
    pp_payload: int = 1,
    pp_timeout_s: float = 60.0,
    storage_pages: int = 0,
    prefetch_threshold: int = 1,
    prefetch_ticks: int = 0,
    prefetch_policy: str = "wait_complete",
    prefetch_timeout: int = 8,
    prefetch_capacity: int = 0,
) -> HiRadixCache:
    """HiRadixCache (incident 3 as ``hiradix-pp-sync-no-drain`` when PP is on,
    incident 5 as ``hiradix-host-indices-view``).

    - ``host_size``: host pool size in tokens (backed-up KV).
    - ``write_through_threshold``: insert hits before a node is copied to the host.
    - ``load_back_threshold``: fewer host-hit tokens than this are not loaded back.
    - ``latency_ticks``: event rounds a controller copy takes to complete.
    - ``kv_row_elems``: fp16 elements per token row in the device and host buffers.
    - ``pp_world_size``: pipeline ranks; 1 runs without PP, N > 1 spawns ranks
      1..N-1 over gloo on 127.0.0.1 and makes this process rank 0.
    - ``pp_lag_s``: how long each peer rank lags before every receive.
    - ``pp_payload``: int32 elements per synced count tensor (each pending send
      pins one clone, so this scales the pile-up's footprint in RSS).
    - ``pp_timeout_s``: bound on the rendezvous and on every gloo operation.
    - ``storage_pages``: a storage tier below the host of this many pages (0: none);
      each new request then prefetches its stored pages into the host first.
    - ``prefetch_threshold``: fewer new tokens (or stored ones) than this are not
      prefetched (the prefetch is revoked).
    - ``prefetch_ticks``: 0 prefetches at admission, at once; N > 0 starts the
      prefetch while the request waits and completes it over N event rounds.
    - ``prefetch_policy``: ``best_effort``, ``wait_complete`` or ``timeout`` (SGLang's).
    - ``prefetch_timeout``: event rounds the ``timeout`` policy waits.
    - ``prefetch_capacity``: tokens prefetches may hold at once (0: SGLang's default).
    """
    kv, host = SlotAllocator(kv_size), HostPool(host_size, kv_row_elems)
    storage = StorageTier(storage_pages, page_size, kv_row_elems) if storage_pages else None
    pipeline = _pipeline(pp_world_size, pp_lag_s, pp_payload, pp_timeout_s)

    def build(pp: Any) -> HiRadixCache:
        return HiRadixCache(
            kv,
            host,
            page_size,
            tuple(inject),
            write_through_threshold,
            load_back_threshold,
            latency_ticks,
            pp=pp,
            pp_payload=pp_payload,
            storage=storage,
            prefetch_threshold=prefetch_threshold,
            prefetch_ticks=prefetch_ticks,
            prefetch_policy=prefetch_policy,
            prefetch_timeout=prefetch_timeout,
            prefetch_capacity=prefetch_capacity,
        )

    cache: HiRadixCache = _with_pipeline(build, pipeline)
    return cache


def himamba_cache(
    inject: Sequence[str] = (),
    kv_size: int = 8192,
    mamba_size: int = 64,
    host_size: int = 2048,
    mamba_host_size: int | None = None,
    page_size: int = 1,
    conv_shape: tuple[int, ...] = CONV_SHAPE,
    ssm_shape: tuple[int, ...] = SSM_SHAPE,
    write_through_threshold: int = 2,
    load_back_threshold: int = 2,
    latency_ticks: int = 2,
    kv_row_elems: int = 8,
    stale_link_guard: bool = False,
) -> HiMambaRadixCache:
    """HiMambaRadixCache (incident 2 as ``himamba-stale-host-leaf``).

    - ``host_size``: host KV pool size in tokens; small makes ``write_backup``
      evict host leaves during inserts, the incident's trigger.
    - ``mamba_host_size``: host Mamba state slots (default: ``2 * mamba_size``).
    - ``write_through_threshold``, ``load_back_threshold``, ``latency_ticks``,
      ``kv_row_elems``: as for :func:`hiradix_cache`.
    - ``stale_link_guard``: the parent-link check before each delete, a hardening
      no SGLang release had (off: the fixed code is what 0.5.11-0.5.17 ran).
    """
    host_states = 2 * mamba_size if mamba_host_size is None else mamba_host_size
    shapes = (tuple(conv_shape), tuple(ssm_shape))
    return HiMambaRadixCache(
        SlotAllocator(kv_size),
        StatePool(mamba_size, *shapes),
        HostPool(host_size, kv_row_elems),
        StatePool(host_states, *shapes, name="mamba_host"),
        page_size,
        tuple(inject),
        write_through_threshold,
        load_back_threshold,
        latency_ticks,
        stale_link_guard=stale_link_guard,
    )


def pd_prefill_cache(
    inject: Sequence[str] = (),
    kv_size: int = 4096,
    host_size: int = 8192,
    page_size: int = 1,
    storage_pages: int = 16384,
    prefetch_threshold: int = 16,
    prefetch_ticks: int = 4,
    metadata_size: int = 32,
) -> PrefillCache:
    """The prefill side of PD (``refcache.disagg``): HiRadixCache with a storage tier and
    asynchronous prefetch, as SGLang's prefill server runs with HiCache, and its metadata
    rows. Options as for :func:`hiradix_cache`; ``metadata_size``: metadata rows
    (requests between bootstrap and the end of their transfer)."""
    return PrefillCache(
        SlotAllocator(kv_size), HostPool(host_size), page_size, tuple(inject),
        storage=StorageTier(storage_pages, page_size, 8) if storage_pages else None,
        prefetch_threshold=prefetch_threshold, prefetch_ticks=prefetch_ticks,
        metadata_size=metadata_size,
    )


def pd_decode_cache(
    inject: Sequence[str] = (),
    kv_size: int = 4096,
    page_size: int = 1,
    metadata_size: int = 32,
    req_slots: int = 24,
) -> DecodeCache:
    """The decode side of PD (``refcache.disagg``): RadixCache (SGLang's decode radix
    cache) with its metadata rows and request rows; ``req_slots``: rows for running
    plus preallocated requests (SGLang's ``max_running_requests + pre_alloc_size``)."""
    return DecodeCache(SlotAllocator(kv_size), page_size, tuple(inject),
                       metadata_size=metadata_size, req_slots=req_slots)


def unified_hicache(
    inject: Sequence[str] = (),
    kv_size: int = 8192,
    mamba_size: int | None = 64,
    host_size: int = 4096,
    mamba_host_size: int | None = None,
    page_size: int = 1,
    conv_shape: tuple[int, ...] = CONV_SHAPE,
    ssm_shape: tuple[int, ...] = SSM_SHAPE,
    write_through_threshold: int = 2,
    load_back_threshold: int = 2,
    latency_ticks: int = 2,
    kv_row_elems: int = 8,
) -> Any:
    """UnifiedRadixCache with a host tier (SGLang's init_hicache), FULL or FULL+MAMBA
    (SGLang #30986 as ``unified-loadback-abort-mamba``).

    - ``mamba_size``: device Mamba state slots (None: FULL only).
    - ``mamba_host_size``: host Mamba state slots (default: ``2 * mamba_size``).
    - the others as for :func:`himamba_cache`.
    """
    from refcache.unified_host import HiUnifiedRadixCache

    kv = SlotAllocator(kv_size)
    components: dict[str, SlotAllocator] = {"full": kv}
    mamba_host = None
    if mamba_size is not None:
        shapes = (tuple(conv_shape), tuple(ssm_shape))
        components["mamba"] = StatePool(mamba_size, *shapes)
        host_states = 2 * mamba_size if mamba_host_size is None else mamba_host_size
        mamba_host = StatePool(host_states, *shapes, name="mamba_host")
    return HiUnifiedRadixCache(
        kv, components, HostPool(host_size, kv_row_elems), mamba_host, page_size,
        tuple(inject), write_through_threshold, load_back_threshold, latency_ticks,
    )


# ---------------------------------------------------------------------- pipelines
def _pipeline(world_size: int, lag_s: float, payload: int, timeout_s: float) -> Pipeline | None:
    if world_size <= 1:
        return None
    return start_pipeline(world_size, lag_s, payload, timeout_s)


def _with_pipeline(build: Callable[[Any], Any], pipeline: Pipeline | None) -> Any:
    """Build the cache on the pipeline's rank 0; its ``close()`` also stops the pipeline."""
    if pipeline is None:
        return build(None)
    try:
        cache = build(pipeline.pp)
    except BaseException:
        pipeline.close()
        raise
    own_close = cache.close

    def close() -> None:
        try:
            own_close()
        finally:
            pipeline.close()

    # An instance attribute: the cache classes need not know who started their peers.
    cache.close = close
    return cache
