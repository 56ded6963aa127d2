"""HiMambaRadixCache: the Mamba cache with a host tier (SGLang's HiMambaRadixCache).

KV and Mamba states are backed up together (``host_value``, ``mamba_host_value``)
once a node reaches the hit threshold during ``insert``. Device eviction demotes
backed-up leaves (their device state is freed, the host copy stays); host
eviction deletes host leaves taken from the set ``evictable_full_host_leaves``
and then deletes the childless tombstones above them
(``_iteratively_delete_tombstone_leaf``). A request resumes from the deepest
node with a state on either tier: a host state is loaded back with the KV.
That state side lives in ``refcache.mamba_host`` (``MambaHostTier``), the host
tier itself in ``refcache.host_backup`` and ``refcache.host_tier``; this module
keeps the host-leaf candidates and every deletion.

Incident 2 lives here as ``himamba-stale-host-leaf``: the host path as SGLang
0.5.10 ran it. ``write_backup`` runs inside ``insert`` and, with the host pool
full, calls ``evict_host``. 0.5.10 backed up any node (0.5.11's PR #22062 made
a node wait until its parent is backed up), locked it only once the write was
queued, and admitted an evicted, backed-up node as a host leaf unless a child
was itself only on the host (0.5.11's PR #22592: no children at all). A node
whose backup failed for lack of room then gets a child with a backup (a gap);
a later insert through that node retries its backup, the host eviction it
triggers deletes the child, and the tombstone cascade deletes the node the
insert is walking. The insert hangs a new leaf under the detached node, and
deleting that leaf later cascades into it: ``AssertionError: parent does not
have child key``. Measured here (tests/refcache/test_himamba.py): reverting
#22062 alone crashes, reverting #22592 alone never does. Fixed as 0.5.11 to
0.5.17 shipped it; the tombstone cascade stops at a locked parent (#23696
stopped it at host-referenced ones; here loads and writes hold the node's lock).

``stale_link_guard`` (off by default, as in every release): a hardening no
release had, which checks the parent link before each delete and drops and
counts (``stale_host_leaf_cleanups``) a stale node instead of crashing.
"""

from __future__ import annotations

import heapq
import logging
from typing import Any

import torch

from refcache import mamba
from refcache.checks import check_links
from refcache.keys import child_key
from refcache.mamba import MambaRadixCache
from refcache.mamba_host import MambaHostTier, has_any_state
from refcache.pools import HostPool, SlotAllocator, StatePool

logger = logging.getLogger(__name__)


class TreeNode(mamba.TreeNode):
    def __init__(self) -> None:
        super().__init__()
        self.host_value: torch.Tensor | None = None
        self.loading = False
        self.mamba_host_value: torch.Tensor | None = None
        self.host_mamba_prev: Any = None
        self.host_mamba_next: Any = None

    @property
    def backuped(self) -> bool:
        return self.host_value is not None


class HiMambaRadixCache(MambaHostTier):
    node_cls = TreeNode
    stale_regression = "himamba-stale-host-leaf"

    def __init__(
        self,
        kv_pool: SlotAllocator,
        mamba_pool: StatePool,
        host_pool: HostPool,
        mamba_host_pool: StatePool,
        page_size: int = 1,
        inject: tuple[str, ...] = (),
        write_through_threshold: int = 2,
        load_back_threshold: int = 2,
        latency_ticks: int = 2,
        device_kv: torch.Tensor | None = None,
        stale_link_guard: bool = False,
    ) -> None:
        self.mamba_host_pool = mamba_host_pool
        self.stale_link_guard = stale_link_guard
        self.stale_host_leaf_cleanups = 0
        self._write_state_locks: set[int] = set()  # writes that also locked the node's state
        self._init_host_tier(
            kv_pool,
            host_pool,
            write_through_threshold,
            load_back_threshold,
            device_kv,
            latency_ticks,
            device_states=mamba_pool,
            host_states=mamba_host_pool,
        )
        MambaRadixCache.__init__(self, kv_pool, mamba_pool, page_size, inject)

    def reset(self) -> None:
        super().reset()
        self.evictable_full_host_leaves: set[Any] = set()

    @property
    def _stale_regressed(self) -> bool:
        return self.stale_regression in self.inject

    def check_hicache_events(self) -> None:
        self.cache_controller.tick()
        self.writing_check()
        self.loading_check()

    # ------------------------------------------------------------------ candidates
    def _may_back_up(self, node: Any) -> bool:
        return self._stale_regressed or super()._may_back_up(node)  # 0.5.10: any node

    def _shield_before_host_eviction(self) -> bool:
        return not self._stale_regressed  # 0.5.10 locks once the write is queued

    def _update_full_host_leaf_status(self, node: Any) -> None:
        candidate = node is not self.root_node and node.evicted and node.backuped
        if self._stale_regressed:  # 0.5.10: unless a child is itself only on the host
            candidate = candidate and not any(
                c.evicted and c.backuped for c in node.children.values())
        else:
            candidate = candidate and len(node.children) == 0  # the fix: real leaves only
        if candidate:
            self.evictable_full_host_leaves.add(node)
        else:
            self.evictable_full_host_leaves.discard(node)

    def _on_unevict(self, node: Any) -> None:
        self.evictable_full_host_leaves.discard(node)

    def _list_insert_split(self, new: Any, child: Any) -> None:
        if not child.evicted:
            super()._list_insert_split(new, child)
            return
        self._update_full_host_leaf_status(new)
        self._update_full_host_leaf_status(child)

    # ------------------------------------------------------------------ deletion
    def _linked(self, node: Any) -> bool:
        """Whether node still sits in its parent (by child key, never the full key)."""
        parent = node.parent
        key = child_key(node.key, self.page_size)
        return parent is not None and parent.children.get(key) is node

    def _unhook(self, node: Any) -> bool:
        """Take node out of its parent's children; False if it was stale (with the guard)."""
        if self.stale_link_guard and not self._linked(node):
            self._drop_stale(node)
            return False
        self._delete_leaf(node)  # on a stale node: AssertionError "parent does not have child key"
        return True

    def _drop_stale(self, node: Any) -> None:
        self.evictable_full_host_leaves.discard(node)
        for lst in (self.full_lru_list, self.mamba_lru_list, self.mamba_host_lru_list):
            if lst.in_list(node):
                lst.remove_node(node)
        self.stale_host_leaf_cleanups += 1
        logger.warning("skipping stale host-leaf candidate %d: not its parent's child", node.id)

    # ------------------------------------------------------------------ device eviction
    def evict_full(self, num_tokens: int) -> int:
        return self._evict_device_tokens(num_tokens)

    def _evict_leaf_node(self, x: Any) -> tuple[int, Any]:
        """evict_mamba's leaf branch: demote or delete, as the device eviction does."""
        if x.lock_ref > 0:  # its KV is pinned (a write in flight): give up the state only
            self._free_device_state(x)
            return 0, x
        return self._evict_device_leaf(x), x

    def _evict_device_leaf(self, x: Any) -> int:
        return self._evict_to_host(x) if x.backuped else self._evict_regular(x)

    def _evict_to_host(self, x: Any) -> int:
        self._free_device_state(x)
        n = self._demote(x)
        self._update_full_host_leaf_status(x)
        return n

    def _evict_regular(self, x: Any) -> int:
        """Delete a device leaf that has no host copy, then the tombstones above it."""
        # SGLang's own checks (0.5.10 to 0.5.17): a node with a host-only child under it
        # (a backup gap, #22062) is no leaf and must not be deleted.
        assert not x.evicted, f"already evicted, {x.id=}"
        assert not x.backuped, f"backuped node, {x.id=}"
        assert len(x.children) == 0, f"non-leaf, {x.id=}"
        if not self._unhook(x):
            return 0
        self._free_device_state(x)
        n = self._free_device_kv(x)
        self._update_full_host_leaf_status(x.parent)
        return n + self._iteratively_delete_tombstone_leaf(x)[1]

    # ------------------------------------------------------------------ host eviction
    def evict_host(self, num_tokens: int) -> int:
        """Delete host leaves from ``evictable_full_host_leaves``, least recently used first."""
        heap = [(n.last_access_time, n.id, n) for n in self.evictable_full_host_leaves]
        heapq.heapify(heap)
        evicted = 0
        while evicted < num_tokens and heap:
            _, _, x = heapq.heappop(heap)
            if x not in self.evictable_full_host_leaves:
                continue
            evicted += self._evict_host_leaf(x)
            parent = x.parent
            if parent in self.evictable_full_host_leaves:
                heapq.heappush(heap, (parent.last_access_time, parent.id, parent))
        return evicted

    def _evict_host_leaf(self, x: Any) -> int:
        if not self._unhook(x):
            return 0
        n = self._free_host(x)
        if x.mamba_host_value is not None:
            self._free_host_state(x)
        self.evictable_full_host_leaves.discard(x)
        self._update_full_host_leaf_status(x.parent)
        return n + self._iteratively_delete_tombstone_leaf(x)[1]

    def _iteratively_delete_tombstone_leaf(self, node: Any) -> tuple[Any, int]:
        """Delete the childless, stateless, unlocked ancestors left above a deleted node."""
        freed = 0
        while self._is_tombstone_leaf(node.parent):
            deleted = self._delete_tombstone_leaf(node.parent)
            if deleted is None:
                break
            freed, node = freed + deleted, node.parent
        return node, freed

    def _is_tombstone_leaf(self, node: Any) -> bool:
        return bool(
            node is not self.root_node
            and len(node.children) == 0
            and not has_any_state(node)
            and node.lock_ref == 0
        )

    def _delete_tombstone_leaf(self, node: Any) -> int | None:
        """Delete one tombstone leaf on either tier; tokens freed, None if stale."""
        if not self._unhook(node):
            return None
        freed = self._free_host(node) if node.backuped else 0
        if not node.evicted:
            freed += self._free_device_kv(node)
        self.evictable_full_host_leaves.discard(node)
        self._update_full_host_leaf_status(node.parent)
        return freed

    def evict_mamba_host(self, num: int) -> int:
        """Drop host states LRU first, keeping the nodes (host leaves go with evict_host)."""
        lst = self.mamba_host_lru_list
        x, dropped = lst.lru_no_lock(), 0
        while dropped < num and x is not None:
            x_next = lst.prev_no_lock(x)
            if x not in self.evictable_full_host_leaves:
                self._free_host_state(x)
                dropped += 1
            x = x_next
        return dropped

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            "host_leaf_candidates": len(self.evictable_full_host_leaves),
            # Candidates that are not leaves: 0.5.10's condition allows them, the fix
            # forbids them; incident 2's crash does not need them (see backup_gaps).
            "host_leaf_candidates_with_children": sum(
                1 for n in self.evictable_full_host_leaves if n.children),
            "mamba_host_used": self.mamba_host_pool.used_size(),
            "mamba_host_lru": len(self.mamba_host_lru_list),
            "stale_host_leaf_cleanups": self.stale_host_leaf_cleanups,
        }

    def _sanity_extra(self, outstanding_states: int) -> None:
        nodes = check_links(self)
        self._check_state_tiers(nodes, outstanding_states)
        root = self.root_node
        leaves = {n.id for n in nodes if n is not root and n.evicted and not n.children}
        if {n.id for n in self.evictable_full_host_leaves} != leaves:
            raise AssertionError("evictable_full_host_leaves is not the set of host-only leaves")
        self._check_host(nodes)
