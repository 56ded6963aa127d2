import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refcache.keys import RadixKey
from refcache.pools import SlotAllocator
from refcache.radix import RadixCache
from tests.refcache.driver import run_churn
from tests.refcache.leakcheck import churn_without_gc


def _slots(cache: RadixCache, n: int) -> torch.Tensor:
    slots = cache.kv_pool.alloc(n)
    assert slots is not None
    return slots


def test_insert_match_split() -> None:
    cache = RadixCache(SlotAllocator(64))
    a = _slots(cache, 5)
    assert cache.insert(RadixKey.of([1, 2, 3, 4, 5]), a) == 0
    m = cache.match_prefix(RadixKey.of([1, 2, 3, 9]))
    assert m.device_indices.tolist() == a[:3].tolist()
    assert cache.node_count() == 3  # root, [1,2,3], [4,5] after the split
    b = _slots(cache, 5)
    assert cache.insert(RadixKey.of([1, 2, 3, 4, 5]), b) == 5
    cache.kv_pool.free(b)
    cache.sanity_check()


def test_extra_key_namespaces_do_not_share() -> None:
    cache = RadixCache(SlotAllocator(64))
    cache.insert(RadixKey.of([1, 2, 3], "a"), _slots(cache, 3))
    assert len(cache.match_prefix(RadixKey.of([1, 2, 3], "b")).device_indices) == 0
    assert len(cache.match_prefix(RadixKey.of([1, 2, 3], "a")).device_indices) == 3


def test_paged_keys_match_whole_pages() -> None:
    cache = RadixCache(SlotAllocator(64), page_size=4)
    cache.insert(RadixKey.of(list(range(8))), _slots(cache, 8))
    m = cache.match_prefix(RadixKey.of([0, 1, 2, 3, 4, 5, 99, 99]))
    assert len(m.device_indices) == 4
    cache.sanity_check()


def test_evict_frees_lru_leaves_not_locked_ones() -> None:
    cache = RadixCache(SlotAllocator(64))
    cache.insert(RadixKey.of([1, 1, 1]), _slots(cache, 3))
    cache.insert(RadixKey.of([2, 2, 2]), _slots(cache, 3))
    locked = cache.match_prefix(RadixKey.of([1, 1, 1])).last_device_node
    cache.inc_lock_ref(locked)
    assert cache.evict(100) == 3
    assert len(cache.match_prefix(RadixKey.of([1, 1, 1])).device_indices) == 3
    cache.dec_lock_ref(locked)
    cache.sanity_check()


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), page=st.sampled_from([1, 2, 4]))
def test_invariants_hold_after_every_operation(seed: int, page: int) -> None:
    churn = run_churn(RadixCache(SlotAllocator(400), page_size=page), seed, 150)
    churn.drain()
    churn.check()


def test_no_detached_nodes_after_churn() -> None:
    before, _, after = churn_without_gc(
        lambda: RadixCache(SlotAllocator(300)), lambda c: run_churn(c, 3, 2000, check=False)
    )
    assert before == 0 and after == 0


def dllm_requests(cache: RadixCache, seed: int, count: int, block: int, drafts: int) -> None:
    """Serve ``count`` diffusion-LLM requests one after another: each decodes two blocks,
    every block rewritten ``drafts`` times in place and cached after each draft."""
    import random

    from refcache.req import Req

    rng = random.Random(seed)
    for rid in range(count):
        shared = [rng.randrange(4) for _ in range(block)]  # prompts share their first page
        req = Req(rid, shared + [rng.randrange(100) for _ in range(rng.randrange(1, 30))])
        assert cache.alloc_request(req)
        for _ in range(2):
            assert cache.extend_request(req, [rng.randrange(100) for _ in range(block)])
            req.unsettled = block
            for draft in range(drafts):
                if draft:
                    req.token_ids[-block:] = [rng.randrange(100) for _ in range(block)]
                if draft == drafts - 1:
                    req.unsettled = 0
                cache.cache_unfinished_req(req)
        cache.cache_finished_req(req)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), drafts=st.integers(1, 4))
def test_a_dllm_block_is_cached_only_once_it_settles(seed: int, drafts: int) -> None:
    cache = RadixCache(SlotAllocator(4096), page_size=4)
    dllm_requests(cache, seed, 12, block=4, drafts=drafts)
    assert cache.pool_accounting()["full"].mismatch == 0
    cache.sanity_check()


def test_incident_35270_counts_each_cached_draft_of_a_block_again() -> None:
    cache = RadixCache(SlotAllocator(4096), page_size=4, inject=("radix-dllm-inflight-block",))
    dllm_requests(cache, 5, 1, block=4, drafts=3)
    # Two blocks, three drafts each: the two earlier drafts of each block hold its
    # four slots a second and a third time; idle, the books show 16 slots too many.
    assert cache.pool_accounting()["full"].mismatch == 2 * 2 * 4


def storage_beyond_values(cache: RadixCache) -> int:
    """Bytes of the storages the tree's node values sit in, beyond the values themselves."""
    storages = {}
    for node in cache.iter_nodes():
        if node is not cache.root_node:
            storage = node.value.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    viewed = sum(n.value.numel() * 8 for n in cache.iter_nodes() if n is not cache.root_node)
    return sum(storages.values()) - viewed


@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), page=st.sampled_from([1, 2, 4]))
def test_every_node_owns_exactly_its_kv_indices(seed: int, page: int) -> None:
    """The #17191 invariant: after inserts, splits and evictions, each node's value is
    its own storage, no larger than the value (nothing of a request or a sibling)."""
    churn = run_churn(RadixCache(SlotAllocator(400), page_size=page), seed, 300, check=False)
    churn.drain()
    for node in churn.cache.iter_nodes():
        value = node.value
        assert value.untyped_storage().nbytes() == value.numel() * value.element_size()
    assert storage_beyond_values(churn.cache) == 0


def test_incident_17191_nodes_keep_the_whole_request_they_were_cut_from() -> None:
    """A long shared prefix, then short turns: fixed, the tree holds what it indexes;
    with ``radix-split-views`` every turn's node pins its whole request's indices."""
    from refcache.req import Req

    def serve(cache: RadixCache) -> int:
        prefix = list(range(1000, 1500))
        for rid in range(8):
            req = Req(rid, prefix + [rid] * 10)
            assert cache.alloc_request(req)
            cache.cache_finished_req(req)
        return storage_beyond_values(cache)

    assert serve(RadixCache(SlotAllocator(4096))) == 0
    # Seven turns after the first each keep a 510-token request for its 10 tokens (the
    # first turn's leaf and the prefix, split off it, share the first request's storage).
    pinned = serve(RadixCache(SlotAllocator(4096), inject=("radix-split-views",)))
    assert pinned == 7 * 500 * 8
