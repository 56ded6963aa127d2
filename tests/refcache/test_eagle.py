"""EAGLE on the SWA and Unified caches: bigram keys, rejected drafts, out-of-window SWA,
and incident 14 (SGLang #34870) at the frontier's call site."""

from __future__ import annotations

from typing import Any

import pytest

from refcache.factories import swa_cache, unified_cache
from refcache.keys import bigram_key
from refcache.req import Req
from refcache.swa_window import own_swa, swa_frontier, swa_start

WINDOW, PAGE = 30, 8  # keep = ceil_align(30, 8) = 32 live tokens below the insert's end
FAMILIES = {"swa": (swa_cache, "swa-eagle-frontier"),
            "unified": (unified_cache, "unified-eagle-frontier")}


def make(family: str, inject: bool = False, eagle: bool = True) -> Any:
    factory, regression = FAMILIES[family]
    return factory(inject=(regression,) if inject else (), kv_size=1024, swa_size=512,
                   sliding_window=WINDOW, page_size=PAGE, eagle=eagle, free_out_of_window=True)


def admitted(cache: Any, tokens: list[int], rid: int = 1) -> Req:
    req = Req(rid, list(tokens))
    assert cache.alloc_request(req)
    return req


def books(cache: Any) -> dict[str, int]:
    return {name: account.mismatch for name, account in cache.pool_accounting().items()}


def test_a_bigram_key_has_one_entry_fewer_than_its_tokens_and_keeps_their_order() -> None:
    key = bigram_key([1, 2, 3], "lora")
    assert len(key) == 2 and key.extra_key == "lora"
    assert bigram_key([1, 2]).token_ids != bigram_key([2, 1]).token_ids
    assert len(bigram_key([7])) == 0


def test_the_frontier_keeps_a_whole_window_below_the_key_it_is_measured_from() -> None:
    # A key of 63 bigrams (64 tokens) ends at page_floor(63) = 56: the frontier lands 32 lower.
    assert swa_frontier(63 - 1, WINDOW, PAGE) == 24
    # Measured from the 64 tokens instead, it assumes the insert ends at 64: 24 live for 30.
    assert 56 - swa_frontier(64 - 1, WINDOW, PAGE) == 24 < WINDOW


@pytest.mark.parametrize("family", FAMILIES)
def test_rejected_drafts_give_back_their_kv_and_swa_slots(family: str) -> None:
    cache = make(family)
    req = admitted(cache, list(range(1, 21)))
    kv, swa = cache.kv_pool.available_size(), cache.swa_pool.available_size()
    assert cache.extend_request(req, [101, 102, 103, 104])
    cache.reject_draft_tokens(req, 3)
    assert req.token_ids[-2:] == [20, 101]
    assert cache.kv_pool.available_size() == kv - 1 and cache.swa_pool.available_size() == swa - 1
    assert cache.held_by(req) == {"kv": 21, "swa": 21}
    with pytest.raises(ValueError, match="uncached"):
        cache.reject_draft_tokens(req, 22)
    cache.cache_finished_req(req)
    assert set(books(cache).values()) == {0}
    assert cache.uses_bigram_keys()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_fixed_frontier_leaves_a_whole_live_window_and_the_request_resumes_on_it(
        family: str) -> None:
    cache = make(family)
    req = admitted(cache, list(range(1, 65)))  # 64 tokens: 63 bigrams, inserted up to 56
    cache.cache_unfinished_req(req)
    assert req.prefix_len == 56 and swa_start(req) == 56
    assert cache.swa_pool.available_size() == 512 - 32 - len(own_swa(req))  # 24 freed
    cache.sanity_check(outstanding_kv=8, outstanding_states=len(own_swa(req)))
    assert cache.extend_request(req, [900, 901])
    cache.cache_finished_req(req)
    cache.sanity_check()
    assert set(books(cache).values()) == {0}
    # The next request over the same prompt revives the tombstoned head it holds SWA for.
    again = admitted(cache, list(range(1, 65)), rid=2)
    assert again.prefix_len == 56
    cache.cache_finished_req(again)
    cache.sanity_check()


@pytest.mark.parametrize("family", FAMILIES)
def test_incident_14_the_token_count_frontier_stops_the_rematch_and_frees_tree_kv(
        family: str) -> None:
    cache = make(family, inject=True)
    req = admitted(cache, list(range(1, 65)))
    cache.cache_unfinished_req(req)
    # 24 live tokens for a window of 30: the re-match ends at the root, the request's
    # cache_protected_len stays at 0 while the tree holds its first 56 tokens' KV.
    assert req.prefix_len == 0 and swa_start(req) == 56
    cache.cache_finished_req(req)  # the insert frees the 56 as duplicates
    assert books(cache)["full"] == 56  # SGLang's "pool memory leak detected"


def test_without_eagle_the_tree_is_keyed_by_tokens() -> None:
    cache = make("swa", eagle=False)
    req = admitted(cache, list(range(1, 65)))
    cache.cache_unfinished_req(req)
    assert req.prefix_len == 64 and not cache.uses_bigram_keys()
    # Unified with Mamba keeps token keys under EAGLE, as SGLang's tree core does.
    hybrid = unified_cache(kv_size=256, mamba_size=8, swa_size=256, sliding_window=WINDOW,
                           eagle=True)
    assert not hybrid.uses_bigram_keys()
