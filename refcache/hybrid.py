"""HybridRadixCache: what the caches with a second per-node pool share.

The Mamba, SWA and Unified caches keep state beside the full KV (a Mamba
state, SWA slots, or both). Freeing that state from an internal node leaves a
*tombstone* that keeps its KV; deleting a leaf cascades into the childless
tombstones above it (each subclass's ``_evict_leaf_node``). Each of these caches
carries its own incident-1 regression (``regression``): under it, its LRU lists
leave a removed node's pointers set (see ``refcache.lru``).

Only code that was written out the same way in those caches lives here.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any

import torch

from refcache.pools import SlotAllocator
from refcache.radix import RadixCache
from refcache.req import Req
from refcache.swa_window import own_swa


class HybridRadixCache(RadixCache, metaclass=ABCMeta):
    """Not used on its own: the base of MambaRadixCache, SWARadixCache, UnifiedRadixCache."""

    regression: str  # the cache's ``*-lru-unlink`` regression name

    def _clears_pointers(self) -> bool:
        return self.regression not in self.inject

    # ------------------------------------------------------------------ evict
    def evict_full(self, num_tokens: int) -> int:
        evicted = 0
        x = self.full_lru_list.leaf_lru_no_lock()
        while evicted < num_tokens and x is not None:
            x_next = self.full_lru_list.prev_leaf_no_lock(x)
            delta, x = self._evict_leaf_node(x)
            evicted += delta
            if not x.parent.children:
                x_next = self.full_lru_list.leaf_lru_no_lock()  # the parent may be LRU now
            x = x_next
        return evicted

    @abstractmethod
    def _evict_leaf_node(self, x: Any) -> tuple[int, Any]:
        """Delete an unlocked leaf and the childless tombstones above it.

        Returns the KV tokens freed and the last node deleted."""

    # ------------------------------------------------------------------ requests
    def _extend_with_swa(
        self, req: Req, tokens: list[int], slots: torch.Tensor | None, swa_pool: SlotAllocator
    ) -> bool:
        """Decode with SWA: ``slots`` (already allocated) join the request's own."""
        if slots is None:
            return False
        if not super().extend_request(req, tokens):
            swa_pool.free(slots)
            return False
        req.aux["swa_indices"] = torch.cat((own_swa(req), slots))
        return True

    def _resume_at(self, req: Req, length: int) -> None:
        """Re-lock an unfinished request on what the re-match of its inserted key gives.

        As SGLang's ``cache_unfinished_req``: the re-match must cover the prefix the
        request held; the request resumes at whatever it covers. One shorter than the
        insert (a leaf whose SWA window is not whole: incident 14) leaves the request
        holding slots the tree owns as if they were its own, and ``cache_protected_len``
        does not advance: the next insert frees them as duplicates."""
        match = self.match_prefix(self.request_key(req, length))
        new = match.device_indices
        if len(new) < req.prefix_len:
            raise AssertionError(f"req {req.rid}: the re-match gives {len(new)} tokens, "
                                 f"fewer than its cached prefix of {req.prefix_len}")
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(match.last_device_node)
        req.kv_indices = torch.cat((new, req.kv_indices[len(new) :]))
        req.prefix_len, req.last_node = len(new), match.last_device_node
