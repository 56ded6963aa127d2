"""Memory pools on torch tensors, with accounting that can prove itself.

Every pool hands out integer slot ids as int64 tensors and refuses a double free
or a foreign id with :class:`PoolError`, so an accounting bug in a cache shows up
at the line that caused it, not hours later as a leak.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class PoolError(RuntimeError):
    """A pool was asked to do something that would corrupt its accounting."""


@dataclass(frozen=True)
class PoolAccount:
    """One pool's books, as SGLang's idle self-check adds them up.

    With no request running, every slot is either free (``available``), held by
    the tree and unlocked (``evictable``) or held by the tree and locked
    (``protected``), so ``mismatch`` is zero; a slot lost or counted twice
    shows as a nonzero ``mismatch``. ``in_transfer`` is the part of
    ``protected`` locked only by the cache's own copies in flight (host
    write-through, load back): those unlock when the copy completes, unlike a
    lock a request forgot to release.

    ``session_held``: slots live streaming sessions hold between turns, outside
    the tree (SGLang's checker adds them: ``available + evictable + protected +
    session_held == size``); ``session_locked``: the part of ``protected``
    locked by those sessions' prefixes. Both are held memory, not lost; both
    stay 0 for a cache without sessions.
    """

    size: int
    available: int
    evictable: int
    protected: int
    in_transfer: int = 0
    session_held: int = 0
    session_locked: int = 0

    @classmethod
    def of(cls, pool: SlotAllocator, evictable: int, protected: int) -> PoolAccount:
        return cls(pool.size, pool.available_size(), evictable, protected)

    @property
    def mismatch(self) -> int:
        """Slots the books are off by: positive counted twice, negative lost."""
        return self.available + self.evictable + self.protected + self.session_held - self.size


class SlotAllocator:
    """Token-slot allocator: ``alloc(n)`` returns n free slot ids, ``free`` returns them.

    Used for the device KV pool, the SWA pool and the host pools. The free list is
    a tensor (as in SGLang's allocators); ``_in_use`` catches double frees.
    """

    def __init__(self, size: int, name: str = "kv") -> None:
        if size <= 0:
            raise ValueError(f"{name} pool size must be positive, got {size}")
        self.name = name
        self.size = size
        self._free = torch.arange(size, dtype=torch.int64)
        self._in_use = torch.zeros(size, dtype=torch.bool)

    def available_size(self) -> int:
        return int(self._free.numel())

    def used_size(self) -> int:
        return self.size - self.available_size()

    def alloc(self, n: int) -> torch.Tensor | None:
        """n slot ids, or None when fewer than n are free (the caller evicts)."""
        taken = self._take(n)
        return None if taken is None else taken.clone()

    def _take(self, n: int) -> torch.Tensor | None:
        """n slot ids as a view of the free list (which stays alive while the view does)."""
        if n < 0:
            raise PoolError(f"{self.name}: cannot allocate {n} slots")
        if n > self._free.numel():
            return None
        out, self._free = self._free[:n], self._free[n:]
        self._in_use[out] = True
        return out

    def free(self, ids: torch.Tensor) -> None:
        if ids.numel() == 0:
            return
        ids = ids.reshape(-1).to(torch.int64)
        if int(ids.min()) < 0 or int(ids.max()) >= self.size:
            raise PoolError(f"{self.name}: foreign slot ids freed (outside 0..{self.size - 1})")
        free = ~self._in_use[ids]
        if bool(free.any()):
            raise PoolError(f"{self.name}: double free of slot ids ({int(free.sum())} of "
                            f"{ids.numel()} already free, e.g. slot {int(ids[free][0])})")
        if torch.unique(ids).numel() != ids.numel():
            raise PoolError(f"{self.name}: double free of slot ids (one id twice in the call)")
        self._in_use[ids] = False
        self._free = torch.cat((self._free, ids))


class StatePool(SlotAllocator):
    """Per-slot recurrent state (Mamba conv and ssm tensors), one slot per sequence.

    ``copy_from`` implements copy-on-write of a matched prefix's state into a
    request's own slot: the cached state stays immutable while the request runs.
    """

    def __init__(
        self,
        size: int,
        conv_shape: tuple[int, ...],
        ssm_shape: tuple[int, ...],
        name: str = "mamba",
    ) -> None:
        super().__init__(size, name)
        self.conv = torch.zeros((size, *conv_shape), dtype=torch.float32)
        self.ssm = torch.zeros((size, *ssm_shape), dtype=torch.float32)

    def copy_from(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        self.conv[dst] = self.conv[src]
        self.ssm[dst] = self.ssm[src]

    def write(self, dst: torch.Tensor, value: float) -> None:
        """Stand-in for a forward pass updating the state of a running request."""
        self.conv[dst] += value
        self.ssm[dst] += value

    def state_bytes(self) -> int:
        per_slot = self.conv[0].numel() * self.conv.element_size()
        return int(per_slot + self.ssm[0].numel() * self.ssm.element_size())


class HostPool(SlotAllocator):
    """Host-memory tier: slots plus a buffer that backed-up KV is copied into.

    ``alloc`` returns a view of the free list, as SGLang's ``HostKVCache.alloc``
    does (``self.free_slots[:need_size]``); ``free`` replaces the free list by a
    concatenation, so a kept view keeps the old list's storage alive. Whoever
    keeps host indices beyond the call clones them (#21624).
    """

    def __init__(self, size: int, row_elems: int = 8, name: str = "host") -> None:
        super().__init__(size, name)
        self.buffer = torch.zeros((size, row_elems), dtype=torch.float16)

    def alloc(self, n: int) -> torch.Tensor | None:
        return self._take(n)
