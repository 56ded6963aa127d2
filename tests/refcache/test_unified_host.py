"""HiUnifiedRadixCache: the unified cache's host tier; SGLang #30986 (a called-off load back)."""

from __future__ import annotations

import pytest
import torch

from refcache.pools import HostPool, SlotAllocator, StatePool
from refcache.req import Req
from refcache.unified_host import LOADBACK_ABORT, HiUnifiedRadixCache
from tests.refcache.driver import run_churn

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]


def make(inject: tuple[str, ...] = (), kv: int = 96, mamba: bool = True,
         **options: int) -> HiUnifiedRadixCache:
    components: dict[str, SlotAllocator] = {"full": SlotAllocator(kv)}
    host_states = None
    if mamba:
        components["mamba"] = StatePool(24, (2,), (3,))
        host_states = StatePool(16, (2,), (3,), name="mamba_host")
    return HiUnifiedRadixCache(components["full"], components, HostPool(256), host_states,
                               inject=inject, **options)


def rounds(cache: HiUnifiedRadixCache, n: int = 3) -> None:
    for _ in range(n):
        cache.check_hicache_events()


def serve(cache: HiUnifiedRadixCache, rid: int, tokens: list[int]) -> Req:
    req = Req(rid, list(tokens))
    assert cache.alloc_request(req)
    cache.cache_finished_req(req)
    rounds(cache)
    return req


def demoted(cache: HiUnifiedRadixCache) -> None:
    """The prompt twice (written through), then demoted: a host-only node with its state."""
    serve(cache, 1, PROMPT)
    serve(cache, 2, PROMPT)
    cache.evict(len(PROMPT))
    (node,) = [n for n in cache.iter_nodes() if n.evicted]
    assert node.comp_host_value["mamba"] is not None


def fill_locked(cache: HiUnifiedRadixCache, size: int) -> Req:
    """A running request that holds nearly all KV: a load back finds no room."""
    hog = Req(99, [9] * size)
    assert cache.alloc_request(hog)
    return hog


def test_load_back_restores_kv_and_state_into_the_request() -> None:
    cache = make()
    demoted(cache)
    state_pool = cache.mamba_pool
    assert state_pool is not None
    req = Req(3, [*PROMPT, 9])
    assert cache.alloc_request(req)
    assert req.prefix_len == len(PROMPT) and req.state_slot is not None
    node = req.last_node
    assert torch.equal(state_pool.conv[req.state_slot], state_pool.conv[node.comp_value["mamba"]])
    cache.cache_finished_req(req)
    rounds(cache)
    cache.sanity_check()
    assert cache.kv_tokens_loaded_back == len(PROMPT)


@pytest.mark.parametrize("inject", [(), (LOADBACK_ABORT,)])
def test_called_off_load_back_gives_its_prepared_slot_back(inject: tuple[str, ...]) -> None:
    cache = make(inject)
    demoted(cache)
    hog = fill_locked(cache, cache.kv_pool.available_size() + cache.full_evictable_size() - 4)
    before = cache.load_backs_called_off
    req = Req(3, [*PROMPT, 9])
    cache.alloc_request(req)  # KV short for the host hit: the load back is called off
    assert cache.load_backs_called_off == before + 1
    for r in (req, hog):
        if r.last_node is not None:
            cache.cache_finished_req(r, is_insert=False)
    rounds(cache)
    books = cache.pool_accounting()["mamba"]
    # Fixed, the books balance; SGLang #30986 loses the slot the prepare published.
    assert books.mismatch == (-1 if inject else 0)


def test_full_only_host_tier_drains_balanced() -> None:
    cache = make(mamba=False)
    churn = run_churn(cache, 3, 200)
    churn.drain()
    rounds(cache)
    cache.sanity_check()
    assert all(a.mismatch == 0 for a in cache.pool_accounting().values())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_invariants_hold_under_churn(seed: int) -> None:
    cache = make(kv=64, latency_ticks=seed)
    churn = run_churn(cache, seed, 200)  # sanity_check after every step
    churn.drain()
    rounds(cache, 4)
    cache.sanity_check()
    books = cache.pool_accounting()
    assert all(a.mismatch == 0 and a.in_transfer == 0 for a in books.values()), books
    assert cache.stats()["backed_up_nodes"] > 0  # the host tier took copies
