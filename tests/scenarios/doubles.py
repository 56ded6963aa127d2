"""Test doubles for the idle check: caches with a leak only an idle moment shows.

Each is a factory as ``--target`` takes them (``make(inject=(), **options)``),
so the same double runs in-process under the scheduler and in a worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from refcache.pools import SlotAllocator
from refcache.radix import RadixCache


def worst_idle(scheduler: Any, steps: int) -> int:
    """Step ``scheduler`` ``steps`` times; the worst idle finding seen (books off, tokens
    locked, stale table entries)."""
    worst = 0
    for _ in range(steps):
        scheduler.step()
        check = scheduler.idle_check
        worst = max(worst, check.mismatch, check.locked, check.stale)
    return worst


class LockLeakingCache(RadixCache):
    """Skips one ``dec_lock_ref`` in ``every``: that path stays locked for good."""

    def __init__(self, kv_size: int, every: int) -> None:
        super().__init__(SlotAllocator(kv_size))
        self.every, self.calls, self.skipped = every, 0, 0

    def dec_lock_ref(self, node: Any) -> None:
        self.calls += 1
        if node is not self.root_node and self.calls % self.every == 0:
            self.skipped += 1
            return
        super().dec_lock_ref(node)


class SlotLosingCache(RadixCache):
    """The first request takes ``lost`` KV slots more and never gives them back (#16067)."""

    def __init__(self, kv_size: int, lost: int) -> None:
        super().__init__(SlotAllocator(kv_size))
        self.lost: torch.Tensor | None = None
        self.lose = lost

    def alloc_request(self, req: Any) -> bool:
        if self.lost is None:
            self.lost = self.kv_pool.alloc(self.lose)
        return super().alloc_request(req)


class WithoutBooks:
    """A cache written before ``pool_accounting`` existed: the rest is delegated."""

    def __init__(self, inner: RadixCache) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "pool_accounting":
            raise AttributeError(name)
        return getattr(self._inner, name)


def lock_leaking_cache(
    inject: Sequence[str] = (), kv_size: int = 8192, every: int = 50, **_: Any
) -> LockLeakingCache:
    return LockLeakingCache(kv_size, every)


def slot_losing_cache(
    inject: Sequence[str] = (), kv_size: int = 8192, lost: int = 3, **_: Any
) -> SlotLosingCache:
    return SlotLosingCache(kv_size, lost)


def cache_without_books(inject: Sequence[str] = (), kv_size: int = 8192, **_: Any) -> WithoutBooks:
    return WithoutBooks(RadixCache(SlotAllocator(kv_size)))


class MissingMethods(WithoutBooks):
    """A cache adapter half written: two methods the scheduler calls are missing."""

    def __getattr__(self, name: str) -> Any:
        if name in ("evict", "extend_request"):
            raise AttributeError(name)
        return super().__getattr__(name)


class Misbehaving(RadixCache):
    """Every method there, but stats() has a string, one lock is never released and
    ``close`` fails."""

    def __init__(self, kv_size: int) -> None:
        super().__init__(SlotAllocator(kv_size))
        self.calls = 0

    def stats(self) -> dict[str, float]:
        return {**super().stats(), "mode": "lru"}  # type: ignore[dict-item]

    def dec_lock_ref(self, node: Any) -> None:
        self.calls += 1
        if node is not self.root_node and self.calls == 3:
            return
        super().dec_lock_ref(node)

    def close(self) -> None:
        raise RuntimeError("the peer is gone")


def missing_methods(kv_size: int = 8192) -> MissingMethods:
    return MissingMethods(RadixCache(SlotAllocator(kv_size)))


def misbehaving(kv_size: int = 8192) -> Misbehaving:
    return Misbehaving(kv_size)


class PrefetchNeverDone(RadixCache):
    """SGLang's ``check_prefetch_progress`` always says the storage prefetch is still
    running: no request is ever admitted, so no memory budget can fail (RELIABILITY-3
    case 85)."""

    def __init__(self, kv_size: int) -> None:
        super().__init__(SlotAllocator(kv_size))

    def check_prefetch_progress(self, req: Any) -> bool:
        return False


class NoSlotsForABatch(RadixCache):
    """``alloc_tokens`` is None for every decode batch (admission still allocates): under
    overlap scheduling requests are admitted and never decode (RELIABILITY-3 case 92)."""

    def __init__(self, kv_size: int) -> None:
        super().__init__(SlotAllocator(kv_size))
        self.admitting = False

    def alloc_request(self, req: Any) -> bool:
        self.admitting = True
        try:
            return super().alloc_request(req)
        finally:
            self.admitting = False

    def alloc_tokens(self, n: int) -> torch.Tensor | None:
        return super().alloc_tokens(n) if self.admitting else None


def prefetch_never_done(inject: Sequence[str] = (), kv_size: int = 2048,
                        **_: Any) -> PrefetchNeverDone:
    return PrefetchNeverDone(kv_size)


def no_slots_for_a_batch(inject: Sequence[str] = (), kv_size: int = 2048,
                         **_: Any) -> NoSlotsForABatch:
    return NoSlotsForABatch(kv_size)


class KeepsEverySession(RadixCache):
    """A per-request session table that never forgets a request (RELIABILITY-3 case 89):
    the leak ``request_tables()`` exists to show, on a cache with no storage tier."""

    def __init__(self, kv_size: int) -> None:
        super().__init__(SlotAllocator(kv_size))
        self.sessions: dict[int, int] = {}

    def alloc_request(self, req: Any) -> bool:
        admitted = super().alloc_request(req)
        if admitted:
            self.sessions[req.rid] = len(req.token_ids)
        return admitted

    def request_tables(self) -> dict[str, list[int]]:
        return {"sessions": list(self.sessions)}


def keeps_every_session(inject: Sequence[str] = (), kv_size: int = 2048,
                        **_: Any) -> KeepsEverySession:
    return KeepsEverySession(kv_size)
