import gc
import random
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refcache.keys import RadixKey
from refcache.pools import SlotAllocator
from refcache.regressions import UnknownRegression
from refcache.req import Req
from refcache.swa import SWARadixCache, TreeNode
from tests.refcache.driver import Churn
from tests.refcache.leakcheck import churn_without_gc, detached_alive, gc_disabled

BROKEN = ("swa-lru-unlink",)
OPS = ("admit", "finish", "chunk", "decode", "evict")


def make(
    inject: tuple[str, ...] = (), window: int = 5, page: int = 1, kv: int = 300, swa: int = 120
) -> SWARadixCache:
    return SWARadixCache(SlotAllocator(kv), SlotAllocator(swa, "swa"), window, page, inject)


class SWAChurn(Churn):
    """The shared driver, with SWA eviction mixed into the explicit evictions."""

    def evict(self) -> None:
        self.cache.evict(self.rng.randrange(0, 40), swa_num=self.rng.randrange(0, 24))


def churn(cache: SWARadixCache, seed: int, steps: int) -> SWAChurn:
    """Random churn, then finish everything and evict the whole tree."""
    driver = SWAChurn(cache, random.Random(seed))
    for _ in range(steps):
        driver.step()
    driver.drain()
    cache.evict(cache.kv_pool.size, swa_num=cache.swa_pool.size)
    return driver


def _insert(cache: SWARadixCache, tokens: list[int]) -> None:
    kv, swa = cache.kv_pool.alloc(len(tokens)), cache.swa_pool.alloc(len(tokens))
    assert kv is not None and swa is not None
    prefix = cache.insert_with_swa(RadixKey.of(tokens), kv, swa)
    cache.kv_pool.free(kv[:prefix])


def _node(cache: SWARadixCache, tokens: list[int]) -> TreeNode:
    """The node ending exactly at ``tokens`` (page size 1), without touching the lists."""
    node: TreeNode = cache.root_node
    depth = 0
    while depth < len(tokens):
        node = node.children[tokens[depth]]
        depth += len(node.key)
    assert depth == len(tokens)
    return node


def test_swa_eviction_tombstones_internal_nodes_and_keeps_their_kv() -> None:
    cache = make(window=2)
    _insert(cache, [1, 2, 3])
    _insert(cache, [1, 2, 3, 4, 5])
    parent = cache.root_node.children[1]
    assert cache.evict_swa(1) == 3  # the parent is least recently used and internal
    assert parent.swa_tombstone and parent.swa_value is None and parent.value is not None
    assert cache.swa_pool.available_size() == cache.swa_pool.size - 2
    assert len(cache.match_prefix(RadixKey.of([1, 2, 3, 4, 5])).device_indices) == 5
    assert len(cache.match_prefix(RadixKey.of([1, 2, 3])).device_indices) == 0
    cache.sanity_check()


def test_match_ends_only_where_the_last_window_holds_swa() -> None:
    cache = make(window=3)
    short, long = [1, 1, 1, 1, 2, 2], [5, 5, 5, 5, 3, 3, 3]
    for tokens in (short[:4], short, long[:4], long):
        _insert(cache, tokens)
    cache.evict_swa(4)  # the LRU node: the parent on the short path
    cache.match_prefix(RadixKey.of(short))  # the long path's parent is LRU now
    cache.evict_swa(4)
    assert _node(cache, short[:4]).swa_tombstone and _node(cache, long[:4]).swa_tombstone
    # after the tombstone only 2 SWA tokens: a window of 3 cannot be served
    assert len(cache.match_prefix(RadixKey.of(short)).device_indices) == 0
    assert len(cache.match_prefix(RadixKey.of(long)).device_indices) == 7
    cache.sanity_check()


def test_lock_covers_full_to_root_but_swa_only_over_the_window() -> None:
    cache = make(window=4)
    for n in (3, 6, 9):
        _insert(cache, [7] * n)
    top, mid, low = (_node(cache, [7] * n) for n in (3, 6, 9))
    cache.inc_lock_ref(low)
    assert (top.lock_ref, mid.lock_ref, low.lock_ref) == (1, 1, 1)
    assert (top.swa_lock_ref, mid.swa_lock_ref, low.swa_lock_ref) == (0, 1, 1)
    assert cache.swa_protected_size() == 6 and cache.full_protected_size() == 9
    assert cache.evict_swa(100) == 3  # only the top node is outside every locked window
    assert top.swa_tombstone and not mid.swa_tombstone
    cache.dec_lock_ref(low)
    assert cache.swa_protected_size() == 0 and cache.full_protected_size() == 0
    cache.sanity_check()


def test_unlock_stays_symmetric_after_a_split_moves_the_window_end() -> None:
    cache = make(window=4)
    _insert(cache, [5] * 6)
    leaf = cache.root_node.children[5]
    cache.inc_lock_ref(leaf)  # one node of 6 tokens covers the window
    cache.match_prefix(RadixKey.of([5, 9]))  # splits it into [5] + [5] * 5
    upper = cache.root_node.children[5]
    assert upper is not leaf and upper.swa_lock_ref == 1 and upper.swa_uuid is not None
    cache.dec_lock_ref(leaf)
    assert upper.swa_lock_ref == 0 and leaf.swa_lock_ref == 0
    cache.sanity_check()


def test_request_revives_a_tombstone_with_its_own_swa_slots() -> None:
    cache = make(window=2)
    _insert(cache, [1, 2, 3])
    _insert(cache, [1, 2, 3, 4])
    cache.evict_swa(1)
    parent = cache.root_node.children[1]
    assert parent.swa_tombstone
    req = Req(1, [1, 2, 3, 9])  # the match cannot use the tombstone: all 4 tokens are new
    assert cache.alloc_request(req) and req.prefix_len == 0
    assert len(req.aux["swa_indices"]) == 4
    held = cache.held_by(req)
    assert held == {"kv": 4, "swa": 4}
    cache.sanity_check(held["kv"], held["swa"])
    cache.cache_finished_req(req)
    assert not parent.swa_tombstone and len(parent.swa_value) == 3
    cache.sanity_check()


def test_stale_swa_prev_closes_a_cycle_only_gc_frees() -> None:
    for inject, cyclic in (((), False), (BROKEN, True)):
        with gc_disabled():
            cache = make(inject, window=2)
            _insert(cache, [1, 2, 3])
            _insert(cache, [1, 2, 3, 4])
            parent, child = cache.root_node.children[1], _node(cache, [1, 2, 3, 4])
            cache.evict_swa(1)
            assert (parent.swa_prev is child) == cyclic  # children sit MRU-side of parents
            refs = weakref.ref(parent), weakref.ref(child)
            del parent, child
            cache.evict_full(1)  # the child, then the childless tombstone parent
            assert cache.node_count() == 1
            assert all(r() is not None for r in refs) == cyclic
            gc.collect()
            assert all(r() is None for r in refs)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 2**16)), min_size=30, max_size=200),
    page=st.sampled_from([1, 4]),
    window=st.integers(1, 12),
    swa=st.integers(48, 160),
    broken=st.booleans(),
)
def test_invariants_hold_after_every_operation(
    ops: list[tuple[str, int]], page: int, window: int, swa: int, broken: bool
) -> None:
    cache = make(BROKEN if broken else (), window, page, swa=swa)
    driver = SWAChurn(cache, random.Random(0))
    driver.replay(ops)
    driver.drain()
    driver.check()
    assert cache.swa_protected_size() == 0 and cache.full_protected_size() == 0


@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), page=st.sampled_from([1, 4]))
def test_long_random_churn_keeps_invariants(seed: int, page: int) -> None:
    driver = SWAChurn(make(page=page), random.Random(seed))
    tombstones = 0
    for _ in range(300):
        driver.step()
        driver.check()
        tombstones = max(tombstones, int(driver.cache.stats()["tombstones"]))
    assert tombstones > 0  # the churn did exercise SWA tombstones


@pytest.mark.parametrize("page", [1, 4])
def test_fixed_code_leaves_no_detached_nodes(page: int) -> None:
    before, collected, after = churn_without_gc(
        lambda: make(page=page), lambda c: churn(c, 7, 3000)
    )
    assert (before, collected, after) == (0, 0, 0)


@pytest.mark.parametrize("page", [1, 4])
def test_lru_unlink_regression_leaves_cycles_only_gc_frees(page: int) -> None:
    before, collected, after = churn_without_gc(
        lambda: make(BROKEN, page=page), lambda c: churn(c, 7, 3000)
    )
    assert before > 200, before  # measured: 361 (page 1), 267 (page 4); fixed: 0
    assert collected > before
    assert after == 0


def test_detached_count_by_gc_matches_the_cache_gauge() -> None:
    with gc_disabled():
        cache = make(BROKEN)
        churn(cache, 3, 500)
        assert detached_alive(cache) == cache.detached_alive_nodes() > 0
        assert cache.stats()["detached_alive_nodes"] == cache.detached_alive_nodes()
        gc.collect()
        assert detached_alive(cache) == 0


def test_constructor_rejects_unknown_regressions_and_bad_windows() -> None:
    with pytest.raises(UnknownRegression, match="Did you mean swa-lru-unlink"):
        make(("swa-lru-unlnk",))
    with pytest.raises(UnknownRegression, match=r"Known: .*mamba-lru-unlink"):
        make(("nope",))
    with pytest.raises(ValueError, match="sliding_window"):
        make(window=0)
    with pytest.raises(ValueError, match="insert_with_swa"):
        make().insert(RadixKey.of([1]), torch.tensor([0]))
