"""RadixCache: the plain prefix cache, on the tree machinery of ``radix_tree``.

Eviction takes unlocked leaves from the LRU end; locks run from a node to the
root; requests match their prefix, lock it and allocate the rest, and give
their tokens to the tree when they pause or finish. Subclasses add
per-component state through the hooks marked ``hook`` (here and in
``RadixTree``).
"""

from __future__ import annotations

from typing import Any

import torch

from refcache.checks import check_tree
from refcache.keys import RadixKey, bigram_key, page_aligned
from refcache.node import BaseNode
from refcache.pools import PoolAccount
from refcache.radix_tree import MatchResult, RadixTree
from refcache.req import Req

__all__ = ["MatchResult", "RadixCache", "TreeNode"]


class TreeNode(BaseNode):
    pass


class RadixCache(RadixTree):
    node_cls: type[BaseNode] = TreeNode
    DLLM_REGRESSION = "radix-dllm-inflight-block"
    # EAGLE: the tree is keyed by bigrams (``refcache.keys.bigram_key``); the SWA and
    # Unified caches take it as their ``eagle`` option, as SGLang's ``is_eagle``.
    bigram_keys = False

    def close(self) -> None:
        """Release external resources (process groups, threads); none here."""

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int, **_: int) -> int:
        """Evict at least ``num_tokens`` KV tokens from unlocked leaves, LRU first."""
        evicted = 0
        x = self.full_lru_list.leaf_lru_no_lock()
        while evicted < num_tokens and x is not None:
            x_next = self.full_lru_list.prev_leaf_no_lock(x)
            parent = x.parent
            evicted += self._evict_leaf(x)
            if not parent.children and parent is not self.root_node:
                x_next = self.full_lru_list.leaf_lru_no_lock()  # the parent became a leaf
            x = x_next
        return evicted

    def _evict_leaf(self, x: Any) -> int:
        self.kv_pool.free(x.value)
        self.full_evictable_size_ -= len(x.value)
        self.full_lru_list.remove_node(x)
        self._delete_leaf(x)
        return len(x.value)

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: Any) -> None:
        while node is not self.root_node:
            if node.lock_ref == 0:
                self.full_evictable_size_ -= len(node.value)
                self.full_protected_size_ += len(node.value)
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, node: Any) -> None:
        while node is not self.root_node:
            if node.lock_ref == 1:
                self.full_evictable_size_ += len(node.value)
                self.full_protected_size_ -= len(node.value)
            if node.lock_ref <= 0:
                raise AssertionError(f"lock_ref of node {node.id} would go negative")
            node.lock_ref -= 1
            node = node.parent

    def full_evictable_size(self) -> int:
        return self.full_evictable_size_

    def full_protected_size(self) -> int:
        return self.full_protected_size_

    # ------------------------------------------------------------------ requests
    def alloc_tokens(self, n: int) -> torch.Tensor | None:
        """n KV slots, evicting unlocked leaves first if the pool is short."""
        short = n - self.kv_pool.available_size()
        if short > 0:
            self.evict(short)
        return self.kv_pool.alloc(n)

    def alloc_request(self, req: Req) -> bool:
        """Match the request's prefix, lock it and allocate the rest; False if full."""
        match = self._match_for_request(self.request_key(req))
        self.inc_lock_ref(match.last_device_node)
        # Per-request state first, then KV, as SGLang's scheduler does; a request
        # that cannot be scheduled gives both back (#16067 kept the Mamba slot).
        if not self._alloc_request_state(req, match):
            self.dec_lock_ref(match.last_device_node)
            return False
        slots = self.alloc_tokens(len(req.token_ids) - len(match.device_indices))
        if slots is None:
            self._unschedule_request_state(req)
            self.dec_lock_ref(match.last_device_node)
            return False
        req.kv_indices = torch.cat((match.device_indices, slots))
        req.prefix_len = len(match.device_indices)
        req.last_node = match.last_device_node
        return True

    def request_key(self, req: Req, length: int | None = None) -> RadixKey:
        """The request's radix key of ``length`` entries (all it has by default): its
        tokens, or with bigram keys the bigrams of its first ``length + 1`` tokens."""
        if not self.bigram_keys:
            return req.key(length)
        tokens = req.token_ids if length is None else req.token_ids[: length + 1]
        return bigram_key(tokens, req.extra_key)

    def key_units(self, n_tokens: int) -> int:
        """Entries of the key over ``n_tokens`` tokens: one fewer with bigram keys (the
        last token's KV is the request's until the next token makes its bigram)."""
        return max(0, n_tokens - 1) if self.bigram_keys else n_tokens

    def uses_bigram_keys(self) -> bool:
        """Whether the tree is keyed by bigrams (EAGLE), for the scenario's notes."""
        return self.bigram_keys

    def _match_for_request(self, key: RadixKey) -> MatchResult:
        """hook: the match a new request starts from (HiCache loads host hits back)."""
        return self.match_prefix(key)

    def _alloc_request_state(self, req: Req, match: MatchResult) -> bool:
        """hook: allocate per-request state beyond KV slots (Mamba: a state slot)."""
        return True

    def _unschedule_request_state(self, req: Req) -> None:
        """hook: give back what ``_alloc_request_state`` took, the request not scheduled."""

    def extend_request(
        self, req: Req, tokens: list[int], slots: torch.Tensor | None = None
    ) -> bool:
        """Decode: give new tokens their slots; False when the pool is full.

        ``slots``: allocated before by ``alloc_tokens``. Overlap scheduling takes a
        batch's slots when it launches and commits the tokens when the result comes
        back; until then the slots are the scheduler's, not the request's.
        """
        if slots is None:
            slots = self.alloc_tokens(len(tokens))
            if slots is None:
                return False
        elif len(slots) != len(tokens):
            raise ValueError(f"{len(tokens)} tokens committed into {len(slots)} slots")
        req.token_ids.extend(tokens)
        req.kv_indices = torch.cat((req.kv_indices, slots))
        return True

    def reject_draft_tokens(self, req: Req, n: int) -> None:
        """Speculative decoding: the last ``n`` tokens ``extend_request`` gave ``req``
        were drafts the target model rejected; their slots go back, as SGLang frees the
        rejected drafts' ``out_cache_loc`` after the verify step."""
        if n <= 0:
            return
        if n > len(req.kv_indices) - req.prefix_len:
            raise ValueError(f"req {req.rid}: {n} drafts rejected, but only "
                             f"{len(req.kv_indices) - req.prefix_len} tokens are uncached")
        self.kv_pool.free(req.kv_indices[-n:])
        req.kv_indices = req.kv_indices[:-n].clone()
        del req.token_ids[-n:]
        self._reject_request_state(req, n)

    def _reject_request_state(self, req: Req, n: int) -> None:
        """hook: give back the per-token state of the last ``n`` (rejected) tokens."""

    def free_tokens(self, slots: torch.Tensor) -> None:
        """Give back slots from ``alloc_tokens`` that no request's tokens hold (the
        slots of an overlap batch in flight whose request has left)."""
        self.kv_pool.free(slots)

    def cache_unfinished_req(self, req: Req) -> None:
        """Insert what the request computed so far and re-lock its new last node.

        Only its settled tokens: a diffusion LLM rewrites its in-flight block's
        ids every denoise step while the slots stay, and caching that block
        (``radix-dllm-inflight-block``, SGLang #35270, fixed by #35470) puts
        the same slots under one node per draft, so ``evictable_size()``
        counts them twice and the idle check finds more than the pool holds.
        """
        cached = len(req.kv_indices) if self.DLLM_REGRESSION in self.inject else req.settled_len()
        length = page_aligned(cached, self.page_size)
        prefix = self.insert(req.key(length), req.kv_indices[:length], self._insert_extra(req))
        self.kv_pool.free(req.kv_indices[req.prefix_len : prefix])
        match = self.match_prefix(req.key(length))
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(match.last_device_node)
        new = match.device_indices
        req.kv_indices = torch.cat((new, req.kv_indices[len(new) :]))
        req.prefix_len, req.last_node = len(new), match.last_device_node

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """Insert the finished request, free what the tree already had, unlock.

        A block still being denoised when the request ends is not cached: its
        slots are freed with the unaligned tail. ``is_insert=False`` (an abort,
        a failure, a retraction) caches nothing and gives everything back.
        """
        if not is_insert:
            self.release_running_req(req)
            return
        length = page_aligned(req.settled_len(), self.page_size)
        prefix = self.insert(req.key(length), req.kv_indices[:length], self._insert_extra(req))
        self.kv_pool.free(req.kv_indices[req.prefix_len : prefix])
        self.kv_pool.free(req.kv_indices[length:])  # the unaligned tail is not cached
        self._release_request_state(req)
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    def release_running_req(self, req: Req) -> None:
        """A running request leaves uncached: its own KV slots, its state, its lock."""
        self.kv_pool.free(req.kv_indices[req.prefix_len :])
        req.kv_indices = req.kv_indices[: req.prefix_len]
        self._release_request_state(req)
        self.dec_lock_ref(req.last_node)
        req.last_node = None

    def match_waiting_req(self, req: Req) -> None:
        """The scheduling policy's match of a waiting request; nothing to take here."""

    def release_aborted_request(self, req: Req) -> None:
        """A waiting request leaves (abort, timeout): give back what it took while waiting."""
        self._release_waiting_state(req)

    def _release_waiting_state(self, req: Req) -> None:
        """hook: free what ``match_waiting_req`` gave the request (Mamba: its forked state)."""

    def _insert_extra(self, req: Req) -> dict[str, Any]:
        """hook: extra insert arguments taken from the request (Mamba state)."""
        return {}

    def _release_request_state(self, req: Req) -> None:
        """hook: free per-request state that the tree did not take over."""

    def check_hicache_events(self) -> None:
        """No host tier: nothing to consume."""

    # ------------------------------------------------------------------ introspection
    def stats(self) -> dict[str, float]:
        return {
            "tree_nodes": self.tree_nodes,
            "detached_alive_nodes": self.detached_alive_nodes(),
            "full_lru": len(self.full_lru_list),
            "kv_available": self.kv_pool.available_size(),
            "full_evictable": self.full_evictable_size_,
            "full_protected": self.full_protected_size_,
        }

    def pool_accounting(self) -> dict[str, PoolAccount]:
        """Each pool's books from the counters (cheap: no tree walk), by pool name.

        Subclasses add their pools; with no request running every account's
        ``mismatch`` is zero (what SGLang's idle check asserts)."""
        return {
            "full": PoolAccount.of(
                self.kv_pool, self.full_evictable_size(), self.full_protected_size()
            )
        }

    def pool_allocators(self) -> dict[str, Any]:
        """The allocator behind each pool of the books, by the same name (the harness
        wraps their ``alloc``/``free`` to say which call took the slots the books miss)."""
        return {"full": self.kv_pool}

    def held_slots(self) -> dict[str, torch.Tensor]:
        """The slot ids the tree holds, by pool (what ``evictable + protected`` count);
        a walk of the tree, asked only at an idle moment whose books are short."""
        values = [n.value for n in self.iter_nodes()
                  if n is not self.root_node and n.value is not None]
        return {"full": torch.cat(values) if values else torch.empty(0, dtype=torch.int64)}

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        """Tree, lists and pool accounting agree; raises AssertionError if not.

        ``outstanding_kv`` is the number of KV slots held by running requests
        outside the tree (zero when idle, which is SGLang's idle check);
        ``outstanding_states`` the state slots (Mamba/SWA) they hold.
        """
        check_tree(self, outstanding_kv)
        self._sanity_extra(outstanding_states)

    def _in_full_list(self, node: Any) -> bool:
        """hook: whether a tree node belongs in the full LRU list."""
        return True

    def _sanity_extra(self, outstanding_states: int) -> None:
        """hook: component-specific checks (other lists and pools)."""
