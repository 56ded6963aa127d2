import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refcache.keys import RadixKey
from refcache.mamba import MambaRadixCache
from refcache.pools import SlotAllocator, StatePool
from refcache.regressions import UnknownRegression
from tests.refcache.driver import run_churn
from tests.refcache.leakcheck import churn_without_gc


def make(inject: tuple[str, ...] = (), kv: int = 400, states: int = 24) -> MambaRadixCache:
    return MambaRadixCache(SlotAllocator(kv), StatePool(states, (2,), (3,)), inject=inject)


def _insert(cache: MambaRadixCache, tokens: list[int]) -> None:
    value, state = cache.kv_pool.alloc(len(tokens)), cache.mamba_pool.alloc(1)
    assert value is not None and state is not None
    prefix, exist = cache.insert_with_state(RadixKey.of(tokens), value, state)
    cache.kv_pool.free(value[:prefix])
    if exist:
        cache.mamba_pool.free(state)


def test_split_creates_tombstone_and_match_stops_at_a_state() -> None:
    cache = make()
    _insert(cache, [1, 2, 3, 4])
    _insert(cache, [1, 2, 9])
    upper = cache.root_node.children[1]
    assert upper.mamba_value is None and len(upper.key) == 2  # tombstone from the split
    m = cache.match_prefix(RadixKey.of([1, 2, 7]))
    assert len(m.device_indices) == 0 and m.last_device_node is cache.root_node
    assert len(cache.match_prefix(RadixKey.of([1, 2, 3, 4, 8])).device_indices) == 4
    cache.sanity_check()


def test_evict_mamba_tombstones_internal_then_cascade_deletes() -> None:
    cache = make()
    _insert(cache, [1, 2])
    _insert(cache, [1, 2, 3])
    parent = cache.root_node.children[1]
    assert parent.mamba_value is not None and parent.children
    cache.evict_mamba(1)  # the parent is least recently used
    assert parent.mamba_value is None and parent.children
    cache.evict_full(1)  # the child goes, and with it the childless tombstone parent
    assert cache.node_count() == 1
    cache.sanity_check()


def test_copy_on_write_state_for_requests() -> None:
    from refcache.req import Req

    cache = make()
    _insert(cache, [5, 5, 5])
    node = cache.root_node.children[5]
    cache.mamba_pool.write(node.mamba_value, 4.0)
    req = Req(1, [5, 5, 5, 6])
    assert cache.alloc_request(req)
    assert req.prefix_len == 3 and req.state_slot is not None
    assert torch.equal(
        cache.mamba_pool.conv[req.state_slot], cache.mamba_pool.conv[node.mamba_value]
    )
    cache.mamba_pool.write(req.state_slot, 1.0)
    assert (
        float(cache.mamba_pool.conv[node.mamba_value].sum()) == 8.0
    )  # the cached state is untouched
    cache.cache_finished_req(req)
    cache.sanity_check()


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000))
def test_invariants_hold_after_every_operation(seed: int) -> None:
    churn = run_churn(make(), seed, 150)
    churn.drain()
    churn.check()


@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000))
def test_invariants_hold_with_the_regression_too(seed: int) -> None:
    churn = run_churn(make(("mamba-lru-unlink",)), seed, 150)
    churn.drain()
    churn.check()


def test_fixed_code_leaves_no_detached_nodes() -> None:
    before, collected, after = churn_without_gc(make, lambda c: run_churn(c, 7, 3000, check=False))
    assert (before, after) == (0, 0)
    assert collected == 0


def test_lru_unlink_regression_leaves_cycles_only_gc_frees() -> None:
    before, collected, after = churn_without_gc(
        lambda: make(("mamba-lru-unlink",)), lambda c: run_churn(c, 7, 3000, check=False)
    )
    assert before > 100, before
    assert collected > before
    assert after == 0


def test_unknown_regression_is_a_clear_error() -> None:
    with pytest.raises(UnknownRegression, match="Did you mean mamba-lru-unlink"):
        make(("mamba-lru-unlnk",))


def requests_that_do_not_fit(cache: MambaRadixCache, seed: int, count: int) -> int:
    """Admit random requests, finishing each admitted one; how many failed to schedule."""
    import random

    from refcache.req import Req

    rng, failed = random.Random(seed), 0
    for rid in range(count):
        req = Req(rid, [rng.randrange(50) for _ in range(rng.randrange(20, 600))])
        if cache.alloc_request(req):
            cache.cache_finished_req(req)
        else:
            failed += 1
    return failed


@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000))
def test_a_request_that_cannot_be_scheduled_gives_its_mamba_slot_back(seed: int) -> None:
    cache = make()
    failed = requests_that_do_not_fit(cache, seed, 40)
    assert failed > 0  # requests above the pool's 400 slots must fail
    books = cache.pool_accounting()
    assert {name: a.mismatch for name, a in books.items()} == dict.fromkeys(books, 0)
    cache.sanity_check()


def test_incident_16067_keeps_a_slot_per_failed_schedule() -> None:
    cache = make(("mamba-slot-failed-schedule",), states=200)
    failed = requests_that_do_not_fit(cache, 3, 40)
    assert failed > 0
    assert cache.pool_accounting()["mamba"].mismatch == -failed  # one slot lost per failure
