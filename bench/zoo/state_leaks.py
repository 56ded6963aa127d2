"""Leaks tied to the cache's state: a lock never released, an idle check that keeps copies.

``LockLeak`` leaks capacity, not bytes: its rate and ledger are in tokens.
``IdleLeak`` leaks bytes, but only at the moments the scheduler is idle.
"""

from __future__ import annotations

from typing import Any

import torch

from bench.zoo.base import ZooCache


class LockLeak(ZooCache):
    """``dec_lock_ref`` is skipped once in a while, so a path stays locked for good.

    An error path that returns before its unlock: the node and every
    ancestor keep one lock too many, can never be evicted, and the KV slots
    they hold are lost to the pool (SGLang's idle check would see
    ``protected_size() != 0`` with nothing running). The rate is in tokens
    per hour: a call is skipped whenever the ledger is a token behind and
    the node is not pinned yet, which comes to about one skip in N calls.
    The ledger counts the tokens on the union of the leaked paths
    (``zoo_pinned`` marks them, and a split of a pinned node marks its new
    upper half, so no token counts twice).
    """

    def dec_lock_ref(self, node: Any) -> None:
        # Only a path with unpinned tokens: skipping on a pinned one would add locks, no tokens.
        unpinned = node is not self.root_node and not getattr(node, "zoo_pinned", False)
        if unpinned and self.ledger.owed():
            self.ledger.add(self._pin_path(node))
            return
        super().dec_lock_ref(node)

    def _pin_path(self, node: Any) -> int:
        """Mark node and its ancestors pinned; the tokens newly pinned."""
        added = 0
        while node is not self.root_node and not getattr(node, "zoo_pinned", False):
            node.zoo_pinned = True
            added += len(node.value)
            node = node.parent
        return added

    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        super()._split_extra(new, child, split_len)
        if getattr(child, "zoo_pinned", False):
            new.zoo_pinned = True  # the halves share the tokens the ledger counted once

    def zoo_stats(self) -> dict[str, float]:
        return {"zoo_locked_tokens": float(self.ledger.total)}


class IdleLeak(ZooCache):
    """``check_hicache_events`` with nothing in flight keeps a copy of the free-slot list.

    An idle-time pool audit that appends its snapshot to a history nobody
    trims (``audits``); busy steps retain nothing. The pacing still runs on
    wall time, so the rate is an average over busy and idle time, paid
    only in idle steps. Under a steady load the scheduler is never idle and
    nothing leaks; use the ``idle-gaps`` load (``ZOO`` in ``targets.py``
    gives it). The ledger counts the copies' storage bytes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.audits: list[torch.Tensor] = []

    def check_hicache_events(self) -> None:
        super().check_hicache_events()
        owed = self.ledger.owed() if self.in_flight == 0 else 0
        if owed:
            self.audits.append(self._snapshot(owed))
            self.ledger.add(self.audits[-1].untyped_storage().nbytes())

    def _snapshot(self, nbytes: int) -> torch.Tensor:
        """The free-slot ids, repeated to about ``nbytes`` (a copy: it owns its storage)."""
        free = self.kv_pool._free
        if len(free) == 0:
            free = torch.zeros(1, dtype=torch.int64)
        elements = -(-nbytes // free.element_size())
        return free.repeat(-(-elements // len(free)))[:elements].clone()
