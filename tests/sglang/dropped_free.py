"""A regressed SGLang, for the slot ledger's tests and a measured run: the installed
release with one free call dropped, as a release that lost that call would behave.

- ``drop_mamba_free``: ``HybridReqToTokenPool.free_mamba_cache`` (every release) keeps
  its bookkeeping (the request no longer names its state slot) but never gives the slot
  back to the Mamba allocator.
- ``drop_row_free``: ``BasePrefixCache.free_kv_row`` (0.5.23) gives nothing back, so a
  request that leaves without checkpointing (abort, failure, retraction) loses its row.
- ``drop_session_mamba_free``: ``StreamingSession._free_slot_mamba`` (0.5.23) forgets the
  session's state slot without freeing it, as SGLang #23496's close did: each closed
  session's Mamba state is lost.
- ``drop_session_release``: ``UnifiedRadixCache.release_session`` (0.5.23) does nothing,
  so a closed session's whole record stays (SGLang's own checker counts it held).
- ``drop_host_lock_release``: the host lock's release does nothing
  (``UnifiedTreeCore.dec_host_lock_ref`` on 0.5.23, ``TreeNode.release_host`` before):
  every host copy a backup, load back or prefetch locked stays locked, never evictable.

As a target, the adapter being ``scenarios.sglang:make`` as shipped (``make``: the first
drop; ``make_rows``: the second)::

    LEAK_HARNESS_SGLANG=0.5.23 .venv/bin/leak-harness run radix-exits \\
        --target tests.sglang.dropped_free:make_rows --duration 20s

(``make_sessions``: the third, for the ``*-sessions`` scenarios.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import scenarios.sglang as target
from scenarios.sglang import glue

MARK = "_leak_harness_dropped"


def drop_mamba_free() -> None:
    """Replace ``HybridReqToTokenPool.free_mamba_cache`` by its bookkeeping alone."""
    memory_pool = glue.import_modules(["sglang.srt.mem_cache.memory_pool"])[0]
    pool = memory_pool.HybridReqToTokenPool
    if getattr(pool, MARK, False):
        return

    def free_mamba_cache(self: Any, req: Any, *args: Any, **kwargs: Any) -> None:
        # 0.5.23 keeps the slot in req.kv, 0.5.11 and 0.5.17 on the Req itself.
        kv = getattr(req, "kv", None)
        holder = kv if kv is not None and hasattr(kv, "mamba_pool_idx") else req
        holder.mamba_pool_idx = None

    pool.free_mamba_cache = free_mamba_cache
    setattr(pool, MARK, True)


def drop_row_free() -> None:
    """Make ``BasePrefixCache.free_kv_row`` (0.5.23's row release) give nothing back."""
    base = glue.import_modules(["sglang.srt.mem_cache.base_prefix_cache"])[0]
    cache_cls = base.BasePrefixCache
    if not hasattr(cache_cls, "free_kv_row"):
        raise glue.GlueError(f"SGLang {glue.load().version} has no free_kv_row to drop")

    def free_kv_row(self: Any, kv: Any, ranges: list[tuple[int, int]]) -> None:
        return None

    cache_cls.free_kv_row = free_kv_row


def drop_session_mamba_free() -> None:
    """Make ``StreamingSession._free_slot_mamba`` (0.5.23) clear the session record's
    state slot and track buffers without giving them to the Mamba allocator."""
    streaming = glue.import_modules(["sglang.srt.session.streaming_session"])[0]
    session_cls = streaming.StreamingSession

    def _free_slot_mamba(self: Any, slot: Any) -> None:
        slot.kv.mamba_pool_idx = None
        slot.kv.mamba_ping_pong_track_buffer = None
        slot.kv.mamba_ping_pong_empty = None

    session_cls._free_slot_mamba = _free_slot_mamba


def drop_session_release() -> None:
    """Make ``UnifiedRadixCache.release_session`` (0.5.23) do nothing: a closed session's
    record, with its KV row, tree lock and Mamba slot, stays in the cache for ever."""
    unified = glue.import_modules(["sglang.srt.mem_cache.unified_radix_cache"])[0]

    def release_session(self: Any, session_id: str) -> None:
        return None

    unified.UnifiedRadixCache.release_session = release_session


def drop_host_lock_release() -> None:
    """Make the host lock's release a no-op on the installed release."""
    if glue.version_key(glue.load().version) >= glue.version_key("0.5.23"):
        core = glue.import_modules(["sglang.srt.mem_cache.unified_cache.unified_tree_core"])
        core[0].UnifiedTreeCore.dec_host_lock_ref = lambda self, *args, **kwargs: None
        return
    radix = glue.import_modules(["sglang.srt.mem_cache.radix_cache"])[0]
    radix.TreeNode.release_host = lambda self: None


def make(inject: Sequence[str] = (), kv_size: int = 8192, **options: Any) -> Any:
    """``scenarios.sglang:make`` on the release with ``free_mamba_cache``'s free dropped."""
    glue.load()
    drop_mamba_free()
    return target.make(inject, kv_size, **options)


def make_rows(inject: Sequence[str] = (), kv_size: int = 8192, **options: Any) -> Any:
    """``scenarios.sglang:make`` on the release with ``free_kv_row`` dropped (0.5.23)."""
    glue.load()
    drop_row_free()
    return target.make(inject, kv_size, **options)


def make_sessions(inject: Sequence[str] = (), kv_size: int = 8192, **options: Any) -> Any:
    """``scenarios.sglang:make`` on the release with the session close's Mamba free
    dropped (0.5.23)."""
    glue.load()
    drop_session_mamba_free()
    return target.make(inject, kv_size, **options)


for _factory in (make, make_rows, make_sessions):
    _factory.regressions = ()  # type: ignore[attr-defined]
    _factory.describe = target.describe  # type: ignore[attr-defined]
    _factory.declines = target.declines  # type: ignore[attr-defined]
