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
