"""MambaHostTier: Mamba states on both tiers, beside the KV (HiMamba's state side).

A backed-up node's state is copied to a host state pool with its KV
(``mamba_host_value``, LRU list ``mamba_host``). A request resumes from the
deepest node with a state on either tier: a host state is loaded back with the
KV. Host-leaf candidates and deletion (incident 2's site) stay in
``refcache.himamba``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from refcache.checks import check_list_members
from refcache.host_backup import alloc_host_state
from refcache.host_tier import HostTier
from refcache.keys import RadixKey
from refcache.lru import LRUList
from refcache.mamba import MambaRadixCache
from refcache.pools import PoolAccount, StatePool
from refcache.radix import MatchResult, RadixCache


def has_any_state(node: Any) -> bool:
    return node.mamba_value is not None or node.mamba_host_value is not None


class MambaHostTier(HostTier, MambaRadixCache):
    """Not used on its own: the base of ``HiMambaRadixCache``."""

    # Both set by HiMambaRadixCache's constructor.
    mamba_host_pool: StatePool
    _write_state_locks: set[int]  # writes that also locked the node's state

    def reset(self) -> None:
        super().reset()
        self.mamba_host_lru_list = LRUList(
            "host_mamba_prev", "host_mamba_next", "lock_ref", self._clears_pointers()
        )

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Device match up to the deepest device state; the host hit reaches the
        deepest node with a state on either tier (loading it restores the state)."""
        return self._state_match(key, lambda n: n.mamba_value is not None, has_any_state)

    def _needs_load(self, node: Any) -> bool:
        state_on_host_only = node.mamba_value is None and node.mamba_host_value is not None
        return bool(node.evicted or state_on_host_only)

    def _worth_loading(self, node: Any, tokens: int) -> bool:
        return node.mamba_host_value is not None  # without the state the KV is no use

    def _alloc_for_load(
        self, node: Any, tokens: int
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None] | None:
        slot = self.alloc_state_slot()
        if slot is None:
            return None
        device = self.alloc_tokens(tokens)
        if device is None:
            self.mamba_pool.free(slot)
            return None
        return device, (node.mamba_host_value, slot)

    def _commit_load(self, node: Any, state: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        assert state is not None  # every HiMamba load restores the node's state
        node.mamba_value = state[1]  # filled by the controller's load; load_back locks it
        self.mamba_evictable_size_ += 1
        self.mamba_lru_list.insert_mru(node)

    # ------------------------------------------------------------------ write-through
    def _lock_for_write(self, node: Any) -> None:
        self.inc_lock_ref(node)
        if node.mamba_value is not None:
            self._write_state_locks.add(node.id)

    def _unlock_after_write(self, node: Any) -> None:
        if node.id in self._write_state_locks:
            self._write_state_locks.discard(node.id)
            self.dec_lock_ref(node)
        else:
            # A tombstone revived while its write was in flight holds no state lock.
            RadixCache.dec_lock_ref(self, node)

    def _backup_state(self, node: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        if node.mamba_value is None:
            return None
        slot = alloc_host_state(self.mamba_host_pool, self.evict_mamba_host)
        if slot is None:
            return None  # back up the KV alone
        node.mamba_host_value = slot
        self.mamba_host_lru_list.insert_mru(node)
        return node.mamba_value, slot

    @abstractmethod
    def evict_mamba_host(self, num: int) -> int:
        """Drop host states LRU first, keeping the nodes."""

    # ------------------------------------------------------------------ split and free
    def _split_extra(self, new: Any, child: Any, split_len: int) -> None:
        super()._split_extra(new, child, split_len)
        new.mamba_host_value = None  # a state belongs to the end of its sequence

    def _free_device_state(self, node: Any) -> None:
        if node.mamba_value is not None:
            self._tombstone_internal_node(node)

    def _free_host_state(self, node: Any) -> None:
        self.mamba_host_lru_list.remove_node(node)
        self.mamba_host_pool.free(node.mamba_host_value)
        node.mamba_host_value = None

    # ------------------------------------------------------------------ checks
    def pool_accounting(self) -> dict[str, PoolAccount]:
        """Host states have no locks: every one the tree holds can be dropped."""
        hosted = len(self.mamba_host_lru_list)
        return {
            **super().pool_accounting(),
            "mamba_host": PoolAccount.of(self.mamba_host_pool, hosted, 0),
        }

    def _check_state_tiers(self, nodes: list[Any], outstanding_states: int) -> None:
        """Device states (list, counters, pool) and host states (list, pool) agree with the tree."""
        root = self.root_node
        stateful = [n for n in nodes if n is not root and n.mamba_value is not None]
        check_list_members(self.mamba_lru_list, stateful, "mamba")
        if any(n.evicted or n.mamba_lock_ref < 0 for n in stateful):
            raise AssertionError("a host-only node holds a device state, or a state lock < 0")
        self._check_state_counts(stateful, outstanding_states)
        hosted = [n for n in nodes if n.mamba_host_value is not None]
        check_list_members(self.mamba_host_lru_list, hosted, "mamba host")
        if self.mamba_host_pool.used_size() != len(hosted):
            raise AssertionError("mamba host pool disagrees with the tree's host states")
