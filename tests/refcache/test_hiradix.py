"""HiRadixCache: the host tier's behaviour and invariants, and incident 3 over gloo."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refcache import factories
from refcache.controller import CacheController
from refcache.hiradix import HiRadixCache
from refcache.keys import RadixKey
from refcache.pools import HostPool, SlotAllocator
from refcache.req import Req
from tests.refcache.driver import run_churn
from tests.refcache.leakcheck import churn_without_gc
from tests.refcache.test_pp_sync import HANG_GUARD_S, live_children


def make(kv: int = 64, host: int = 48, **options: Any) -> HiRadixCache:
    return HiRadixCache(SlotAllocator(kv), HostPool(host), **options)


def insert(cache: HiRadixCache, tokens: list[int]) -> torch.Tensor:
    """Insert as a finished request would: the tree keeps what it did not have."""
    value = cache.kv_pool.alloc(len(tokens))
    assert value is not None
    prefix = cache.insert(RadixKey.of(tokens), value)
    cache.kv_pool.free(value[:prefix])
    return value


def rounds(cache: HiRadixCache, n: int = 3) -> None:
    for _ in range(n):
        cache.check_hicache_events()


def test_controller_copies_when_a_transfer_completes() -> None:
    host = HostPool(4)
    device_kv = torch.arange(32, dtype=torch.float16).reshape(4, 8)
    controller = CacheController(device_kv, host, latency_ticks=2)
    controller.write(torch.tensor([2, 3]), torch.tensor([0, 1]), node_id=7)
    controller.tick()
    assert not controller.ack_write_queue and not host.buffer.any()  # still in flight
    controller.tick()
    assert list(controller.ack_write_queue) == [7]
    assert torch.equal(host.buffer[:2], device_kv[2:])
    controller.load(torch.tensor([0, 1]), torch.tensor([0, 1]), node_id=8)
    controller.flush()  # what a forward pass reading the rows waits for
    assert list(controller.ack_load_queue) == [8]
    assert torch.equal(device_kv[:2], device_kv[2:])


def test_write_through_at_threshold_locks_until_acknowledged() -> None:
    cache = make(write_through_threshold=2, latency_ticks=2)
    insert(cache, [1, 2, 3, 4])
    node = cache.match_prefix(RadixKey.of([1, 2, 3, 4])).last_device_node
    assert not node.backuped
    insert(cache, [1, 2, 3, 4])  # second hit: the write starts
    assert node.backuped and node.lock_ref == 1 and node.id in cache.ongoing_write_through
    cache.check_hicache_events()
    assert node.lock_ref == 1  # one tick of two: still in flight
    cache.check_hicache_events()
    assert node.lock_ref == 0 and not cache.ongoing_write_through
    assert cache.host_protected_size() == 4
    cache.sanity_check()


def test_demote_match_and_load_back_move_the_data() -> None:
    cache = make(write_through_threshold=1)
    tokens = [5, 6, 7, 8, 9]
    value = insert(cache, tokens)
    data = torch.arange(len(tokens) * 8, dtype=torch.float16).reshape(len(tokens), 8)
    cache.cache_controller.device_kv[value] = data  # what a forward pass wrote
    rounds(cache)
    node = cache.match_prefix(RadixKey.of(tokens)).last_device_node
    assert torch.equal(cache.host_pool.buffer[node.host_value], data)

    assert cache.evict(5) == 5
    assert node.evicted and node.backuped and node in cache.host_lru_list.members.values()
    assert not cache.full_lru_list.in_list(node)
    cache.cache_controller.device_kv.zero_()
    match = cache.match_prefix(RadixKey.of([*tokens, 1]))
    assert len(match.device_indices) == 0 and match.last_device_node is cache.root_node
    assert match.last_host_node is node and match.host_hit_length == 5

    req = Req(1, [*tokens, 1, 2])
    assert cache.alloc_request(req)
    assert req.prefix_len == 5 and not node.evicted and node.loading
    cache.sanity_check(outstanding_kv=2)
    rounds(cache)
    assert not node.loading
    assert torch.equal(cache.cache_controller.device_kv[req.kv_indices[:5]], data)
    cache.cache_finished_req(req)
    cache.sanity_check()


def test_host_eviction_runs_inside_insert_when_the_host_pool_is_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = make(kv=64, host=8, write_through_threshold=1)
    insert(cache, [1, 1, 1, 1])
    insert(cache, [2, 2, 2, 2])
    rounds(cache)
    cache.evict(8)  # both demoted: the host pool is full of host-only leaves
    assert cache.host_pool.available_size() == 0
    stacks: list[list[str]] = []
    real = HiRadixCache.evict_host

    def spy(self: HiRadixCache, n: int) -> int:
        stacks.append([f.name for f in traceback.extract_stack()])
        return real(self, n)

    monkeypatch.setattr(HiRadixCache, "evict_host", spy)
    insert(cache, [3, 3, 3, 3])  # threshold 1: write_backup needs host room
    assert stacks and {"insert", "write_backup"} <= set(stacks[0])
    node = cache.match_prefix(RadixKey.of([3, 3, 3, 3])).last_device_node
    assert node.backuped
    assert cache.match_prefix(RadixKey.of([1, 1, 1, 1])).host_hit_length == 0  # LRU leaf gone
    cache.sanity_check()


def test_match_stops_at_host_only_nodes_and_splits_them() -> None:
    cache = make(write_through_threshold=1)
    insert(cache, [1, 2])
    insert(cache, [1, 2, 3, 4, 5, 6])
    rounds(cache)
    cache.evict(4)  # demotes the [3, 4, 5, 6] leaf only
    match = cache.match_prefix(RadixKey.of([1, 2, 3, 4, 9]))
    assert len(match.device_indices) == 2 and match.host_hit_length == 2
    assert match.last_host_node.evicted and len(match.last_host_node.children) == 1
    cache.sanity_check()


def test_insert_through_host_only_nodes_adopts_the_callers_slots() -> None:
    cache = make(write_through_threshold=1)
    insert(cache, [1, 2, 3, 4])
    rounds(cache)
    cache.evict(4)
    used = cache.kv_pool.used_size()
    value = insert(cache, [1, 2, 3, 4, 5])
    node = cache.match_prefix(RadixKey.of([1, 2, 3, 4])).last_device_node
    assert torch.equal(node.value, value[:4])  # adopted, not freed
    assert cache.kv_pool.used_size() == used + 5
    rounds(cache)
    cache.sanity_check()


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 10_000),
    page=st.sampled_from([1, 2]),
    host=st.sampled_from([8, 24, 96]),
    threshold=st.integers(1, 3),
    latency=st.integers(0, 3),
)
def test_invariants_hold_after_every_operation(
    seed: int, page: int, host: int, threshold: int, latency: int
) -> None:
    cache = make(
        kv=64,
        host=host,
        page_size=page,
        write_through_threshold=threshold,
        latency_ticks=latency,
    )
    churn = run_churn(cache, seed, 150)  # sanity_check after every step
    churn.drain()
    rounds(cache, latency + 1)
    assert not cache.ongoing_write_through and not cache.ongoing_load_back
    cache.sanity_check()


def test_no_detached_nodes_without_gc() -> None:
    before, collected, after = churn_without_gc(
        lambda: make(host=32, write_through_threshold=1),
        lambda c: run_churn(c, 3, 1500, check=False),
    )
    assert (before, collected, after) == (0, 0, 0)


# ---------------------------------------------------------------------- incident 3 over gloo
@pytest.fixture
def pp_guard() -> Iterator[None]:
    import faulthandler

    faulthandler.dump_traceback_later(HANG_GUARD_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
    assert live_children() == []


def pp_rounds(inject: tuple[str, ...], lag_s: float, rounds: int = 100) -> list[int]:
    """work_list length after each event round of a PP=2 HiRadixCache under churn."""
    cache = factories.hiradix_cache(
        inject, kv_size=64, host_size=48, pp_world_size=2, pp_lag_s=lag_s, pp_payload=256
    )
    sizes = []
    try:
        churn = run_churn(cache, seed=1, steps=0)
        for _ in range(rounds):
            churn.step()  # one scheduler operation, then check_hicache_events
            sizes.append(int(cache.stats()["work_list"]))
    finally:
        cache.close()
    return sizes


@pytest.mark.integration
@pytest.mark.usefixtures("pp_guard")
def test_pp_sync_no_drain_piles_up_works() -> None:
    sizes = pp_rounds(("hiradix-pp-sync-no-drain",), lag_s=0.05)
    assert sizes[-1] == 200 > 50  # two Works per round, none ever reaped on gloo
    assert sizes == sorted(sizes)


@pytest.mark.integration
@pytest.mark.usefixtures("pp_guard")
def test_pp_sync_drained_stays_at_one_rounds_sends() -> None:
    sizes = pp_rounds((), lag_s=0.002)
    assert max(sizes) <= 2


def with_storage(host: int = 256, **options: Any) -> HiRadixCache:
    from refcache.storage import StorageTier

    return make(kv=64, host=host, storage=StorageTier(512), prefetch_threshold=2, **options)


def test_a_stored_prefix_evicted_from_both_tiers_is_prefetched_back_into_the_host() -> None:
    cache = with_storage(write_through_threshold=1)
    tokens = [5, 6, 7, 8, 9, 10]
    value = insert(cache, tokens)
    data = torch.arange(len(tokens) * 8, dtype=torch.float16).reshape(len(tokens), 8)
    cache.cache_controller.device_kv[value] = data
    rounds(cache)  # written to the host, then to storage
    assert cache.storage is not None and len(cache.storage) == len(tokens)
    cache.evict(len(tokens))
    cache.evict_host(len(tokens))  # gone from both tiers; the storage keeps the pages
    assert cache.match_prefix(RadixKey.of(tokens)).host_hit_length == 0
    cache.host_pool.buffer.zero_()

    assert cache.prefetch_from_storage(RadixKey.of([*tokens, 1, 2])) == len(tokens)
    match = cache.match_prefix(RadixKey.of([*tokens, 1]))
    assert match.host_hit_length == len(tokens)
    assert torch.equal(cache.host_pool.buffer[match.last_host_node.host_value], data)
    rounds(cache)  # the two unstored slots go back at the next event round
    cache.sanity_check()


def test_a_prefetch_of_unstored_tokens_is_revoked_and_its_slots_freed_next_round() -> None:
    cache = with_storage()
    before = cache.host_pool.available_size()
    assert cache.prefetch_from_storage(RadixKey.of(list(range(20)))) == 0
    assert cache.host_pool.available_size() == before - 20 and len(cache.host_release) == 1
    rounds(cache, 1)
    assert cache.host_pool.available_size() == before and cache.prefetches == 1
    cache.sanity_check()


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), threshold=st.integers(1, 3))
def test_invariants_hold_with_a_storage_tier_and_prefetches(seed: int, threshold: int) -> None:
    cache = with_storage(host=96, write_through_threshold=threshold)
    churn = run_churn(cache, seed, 150)  # every new request prefetches first
    churn.drain()
    rounds(cache, 3)
    cache.sanity_check()
    assert cache.prefetches > 0


def host_index_storage_bytes(inject: tuple[str, ...]) -> tuple[int, int]:
    """Bytes of the storages behind the tree's host indices, and of the indices."""
    from refcache.storage import StorageTier

    cache = make(kv=4096, host=4096, storage=StorageTier(512), prefetch_threshold=2,
                 write_through_threshold=1, inject=inject)
    for turn in range(40):
        tokens = [turn, *range(100, 130)]
        insert(cache, tokens)  # written through to the host: alloc() hands out a view
        cache.prefetch_from_storage(RadixKey.of([*tokens, 7, 8, 9]))  # revoked: a free
        rounds(cache)
    values = [n.host_value for n in cache.iter_nodes()
              if n is not cache.root_node and n.backuped]
    storages = {v.untyped_storage().data_ptr(): v.untyped_storage().nbytes() for v in values}
    return sum(storages.values()), sum(v.numel() * v.element_size() for v in values)


def test_incident_21624_host_views_keep_old_free_list_storages_alive() -> None:
    kept, indices = host_index_storage_bytes(())
    assert kept == indices  # every node owns a copy of its indices
    kept, indices = host_index_storage_bytes(("hiradix-host-indices-view",))
    assert kept > 20 * indices  # each view keeps the whole free list it was cut from
