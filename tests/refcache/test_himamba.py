"""HiMambaRadixCache: host tier invariants and incident 2 (stale host leaves)."""

from __future__ import annotations

import logging
import random
import traceback
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refcache.himamba import HiMambaRadixCache
from refcache.host_backup import HostBackup
from refcache.keys import RadixKey, child_key
from refcache.pools import HostPool, SlotAllocator, StatePool
from refcache.req import Req
from tests.refcache.driver import Churn, run_churn

STALE = "himamba-stale-host-leaf"
CRASH_SEEDS = (16, 0, 4)  # measured: the broken cache dies at step 157, 380 and 389
MAX_STEPS = 500


def make(inject: tuple[str, ...] = (), host: int = 48, **options: Any) -> HiMambaRadixCache:
    """Small pools: device, mamba and host pressure all within a few dozen requests."""
    return HiMambaRadixCache(
        SlotAllocator(96),
        StatePool(24, (2,), (3,)),
        HostPool(host),
        StatePool(16, (2,), (3,)),
        inject=inject,
        **options,
    )


def insert(cache: HiMambaRadixCache, tokens: list[int]) -> None:
    value, state = cache.kv_pool.alloc(len(tokens)), cache.mamba_pool.alloc(1)
    assert value is not None and state is not None
    prefix, exist = cache.insert_with_state(RadixKey.of(tokens), value, state)
    cache.kv_pool.free(value[:prefix])
    if exist:
        cache.mamba_pool.free(state)


def rounds(cache: HiMambaRadixCache, n: int = 3) -> None:
    for _ in range(n):
        cache.check_hicache_events()


def steps_to_crash(seed: int) -> tuple[int, AssertionError]:
    churn = Churn(make((STALE,)), random.Random(seed))
    for step in range(1, MAX_STEPS + 1):
        try:
            churn.step()
        except AssertionError as err:
            return step, err
    raise AssertionError(f"seed {seed}: no crash within {MAX_STEPS} steps")


@pytest.mark.parametrize("seed", CRASH_SEEDS)
def test_stale_host_leaf_crashes_at_sglangs_non_leaf_check(seed: int) -> None:
    """The backup gap leaves a device node with a host-only child; device eviction then
    takes it for a leaf and SGLang's own check in _evict_regular stops it, as real 0.5.17
    with #22062 reverted did (the traceback PR #22062 quotes)."""
    step, err = steps_to_crash(seed)
    assert str(err).startswith("non-leaf, x.id=")
    frames = [f.name for f in traceback.extract_tb(err.__traceback__)]
    chain = ["evict", "_evict_device_tokens", "_evict_device_leaf", "_evict_regular"]
    positions = [frames.index(name) for name in chain]
    assert positions == sorted(positions) and frames[-1] == "_evict_regular", frames
    assert step <= 450


@pytest.mark.parametrize("seed", CRASH_SEEDS)
def test_fixed_cache_survives_the_same_sequence(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_step, _ = steps_to_crash(seed)
    cache = make()
    host_evicted: list[int] = []
    real_evict_host = cache.evict_host

    def evict_host(n: int) -> int:
        host_evicted.append(real_evict_host(n))
        return host_evicted[-1]

    monkeypatch.setattr(cache, "evict_host", evict_host)
    churn = Churn(cache, random.Random(seed))
    for _ in range(crash_step + 100):
        churn.step()
        churn.check()
        assert all(not n.children for n in cache.evictable_full_host_leaves)
        assert cache.stats()["backup_gaps"] == 0
    assert sum(host_evicted) > 0  # the same pressure: inserts did evict host leaves
    # With only real leaves admitted no candidate goes stale, with no guard (as released).
    assert cache.stale_host_leaf_cleanups == 0 and not cache.stale_link_guard


def test_the_crash_grows_from_a_backup_under_a_parent_without_one() -> None:
    """0.5.10's sequence: a node's write_backup fails for lack of host room, a child's
    later succeeds; that gap is what the re-entrant host eviction needs."""
    churn = Churn(make((STALE,)), random.Random(CRASH_SEEDS[0]))
    gaps = 0
    with pytest.raises(AssertionError, match="non-leaf"):
        for _ in range(MAX_STEPS):
            churn.step()
            gaps = max(gaps, churn.cache.stats()["backup_gaps"])
    assert gaps > 0


@pytest.mark.parametrize("seed", CRASH_SEEDS)
def test_the_leaf_condition_alone_never_crashes(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """PR #22592's leaf condition reverted, #22062's parent check kept: the seeds that
    crash 0.5.10 run on (what the issue saw on real 0.5.17 with only #22592 reverted)."""
    monkeypatch.setattr(HiMambaRadixCache, "_may_back_up", HostBackup._may_back_up)
    churn = Churn(make((STALE,)), random.Random(seed))
    for _ in range(MAX_STEPS + 100):
        churn.step()
    assert churn.cache.stats()["backup_gaps"] == 0


def test_guard_drops_and_counts_a_stale_candidate(caplog: pytest.LogCaptureFixture) -> None:
    cache = make(write_through_threshold=1, stale_link_guard=True)
    insert(cache, [1, 2, 3])
    insert(cache, [7, 8, 9])
    rounds(cache)
    cache.evict(6)
    stale = cache.match_prefix(RadixKey.of([1, 2, 3])).last_host_node
    assert stale in cache.evictable_full_host_leaves
    # A delete path that forgets the candidate set, by hand: the node leaves the tree.
    del cache.root_node.children[child_key(stale.key, cache.page_size)]
    cache.tree_nodes -= 1
    with caplog.at_level(logging.WARNING, logger="refcache.himamba"):
        cache.evict_host(100)
    assert cache.stale_host_leaf_cleanups == 1
    assert stale not in cache.evictable_full_host_leaves
    assert not cache.mamba_host_lru_list.in_list(stale)
    assert "stale host-leaf candidate" in caplog.text
    assert cache.match_prefix(RadixKey.of([7, 8, 9])).host_hit_length == 0  # the real leaf went


def test_load_back_restores_kv_and_state() -> None:
    cache = make(write_through_threshold=1)
    tokens = [4, 4, 5, 5]
    value, state = cache.kv_pool.alloc(4), cache.mamba_pool.alloc(1)
    assert value is not None and state is not None
    cache.mamba_pool.write(state, 3.0)  # the state a forward pass left
    cache.insert_with_state(RadixKey.of(tokens), value, state)
    rounds(cache)
    cache.evict(4)
    match = cache.match_prefix(RadixKey.of([*tokens, 1]))
    assert len(match.device_indices) == 0 and match.host_hit_length == 4
    node = match.last_host_node
    assert node.evicted and node.mamba_value is None and node.mamba_host_value is not None

    req = Req(1, [*tokens, 1])
    assert cache.alloc_request(req)
    assert req.prefix_len == 4 and node.mamba_value is not None
    assert req.state_slot is not None
    expected = torch.full_like(cache.mamba_pool.conv[0], 3.0)
    assert torch.equal(cache.mamba_pool.conv[node.mamba_value[0]], expected)
    assert torch.equal(cache.mamba_pool.conv[req.state_slot[0]], expected)  # copy-on-write
    rounds(cache)
    cache.sanity_check(outstanding_kv=1, outstanding_states=1)
    cache.cache_finished_req(req)
    cache.sanity_check()


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 10_000),
    page=st.sampled_from([1, 2]),
    host=st.sampled_from([16, 48, 200]),
    threshold=st.integers(1, 3),
    latency=st.integers(0, 3),
)
def test_invariants_hold_after_every_operation(
    seed: int, page: int, host: int, threshold: int, latency: int
) -> None:
    cache = make(
        host=host, page_size=page, write_through_threshold=threshold, latency_ticks=latency
    )
    churn = run_churn(cache, seed, 150)  # sanity_check after every step
    churn.drain()
    rounds(cache, latency + 1)
    cache.sanity_check()
    # page_size 2 keys children by a page tuple: a guard keyed wrongly would fire here
    assert cache.stale_host_leaf_cleanups == 0
