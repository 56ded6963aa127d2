"""``pool_accounting()``: each cache's books, read from its counters, tell the truth.

At every moment a pool's books are short by exactly what running requests hold
outside the tree (so at idle they balance, SGLang's idle check); ``in_transfer``
is the part of the protected KV only host copies in flight lock.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from refcache import factories
from refcache.pools import PoolAccount
from refcache.req import Req
from tests.refcache.driver import Churn

STATES: dict[str, Any] = {"conv_shape": (2,), "ssm_shape": (3,)}
MAKERS: dict[str, Callable[[], Any]] = {
    "radix": partial(factories.radix_cache, kv_size=300),
    "mamba": partial(factories.mamba_cache, kv_size=400, mamba_size=24, **STATES),
    "swa": partial(factories.swa_cache, kv_size=300, swa_size=120, sliding_window=5),
    "unified": partial(
        factories.unified_cache,
        kv_size=300,
        mamba_size=24,
        swa_size=120,
        sliding_window=5,
        **STATES,
    ),
    "hiradix": partial(factories.hiradix_cache, kv_size=64, host_size=48, kv_row_elems=2),
    "himamba": partial(
        factories.himamba_cache,
        kv_size=96,
        mamba_size=24,
        host_size=48,
        mamba_host_size=16,
        kv_row_elems=2,
        **STATES,
    ),
}
POOLS = {
    "radix": {"full"},
    "mamba": {"full", "mamba"},
    "swa": {"full", "swa"},
    "unified": {"full", "mamba", "swa"},
    "hiradix": {"full", "host"},
    "himamba": {"full", "mamba", "host", "mamba_host"},
}


class StateChurn(Churn):
    """The shared driver, evicting every kind of pool the caches have."""

    def evict(self) -> None:
        self.cache.evict(
            self.rng.randrange(0, 40),
            mamba_num=self.rng.randrange(0, 4),
            swa_num=self.rng.randrange(0, 24),
        )


def held_by_requests(churn: Churn) -> dict[str, int]:
    """Per pool name, the slots running requests hold outside the tree."""
    if hasattr(churn.cache, "held_by"):
        held = churn.held()
        return {"full": held.pop("kv", 0), **held}
    kv, states = churn.outstanding()
    return {"full": kv, "mamba": states}


def shortfall(books: dict[str, PoolAccount]) -> dict[str, int]:
    return {name: -account.mismatch for name, account in books.items()}


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize("seed", [0, 1])
def test_books_are_short_by_what_requests_hold(kind: str, seed: int) -> None:
    cache = MAKERS[kind]()
    churn = StateChurn(cache, random.Random(seed))
    for _ in range(300):
        churn.step()
        books = cache.pool_accounting()
        held = held_by_requests(churn)
        assert set(books) == POOLS[kind]
        assert shortfall(books) == {name: held.get(name, 0) for name in books}
    churn.drain()
    books = cache.pool_accounting()
    assert shortfall(books) == dict.fromkeys(POOLS[kind], 0)
    assert books["full"].protected == books["full"].in_transfer


def test_locks_of_copies_in_flight_are_told_apart_from_request_locks() -> None:
    cache = factories.hiradix_cache(
        kv_size=64, host_size=48, write_through_threshold=1, latency_ticks=2
    )
    first = Req(1, list(range(10)))
    assert cache.alloc_request(first)
    cache.cache_finished_req(first)  # the new leaf is written through: locked by the copy
    full = cache.pool_accounting()["full"]
    assert (full.protected, full.in_transfer) == (10, 10)
    second = Req(2, [*range(10), 99])
    assert cache.alloc_request(second)  # a request locks the same prefix
    full = cache.pool_accounting()["full"]
    assert (full.protected, full.in_transfer) == (10, 0)
    for _ in range(3):
        cache.check_hicache_events()  # the copy completes and unlocks
    cache.cache_finished_req(second)  # its new leaf is written through, over the whole path
    full = cache.pool_accounting()["full"]
    assert (full.protected, full.in_transfer) == (11, 11)
    for _ in range(3):
        cache.check_hicache_events()
    full = cache.pool_accounting()["full"]
    assert (full.protected, full.in_transfer, full.mismatch) == (0, 0, 0)
