"""A random request driver over the cache protocol, shared by the cache tests.

It plays a tiny scheduler: requests with shared prefixes are admitted
(``alloc_request``), some are chunk-cached (``cache_unfinished_req``), decode a
few tokens (``extend_request``) and finish (``cache_finished_req``), with
explicit eviction mixed in. After every operation it can run the cache's own
``sanity_check`` with what the running requests hold outside the tree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from refcache.req import Req


@dataclass
class Churn:
    cache: Any
    rng: random.Random
    max_running: int = 8
    vocab: int = 4
    prompts: int = 3
    live: list[Req] = field(default_factory=list)
    rid: int = 0

    def outstanding(self) -> tuple[int, int]:
        kv = sum(len(r.kv_indices) - r.prefix_len for r in self.live)
        states = sum(1 for r in self.live if r.state_slot is not None)
        return kv, states

    def new_tokens(self) -> list[int]:
        system = [self.rng.randrange(self.prompts)] * 6
        return system + [self.rng.randrange(self.vocab) for _ in range(self.rng.randrange(1, 24))]

    def admit(self) -> None:
        self.rid += 1
        req = Req(self.rid, self.new_tokens())
        if self.cache.alloc_request(req):
            self.live.append(req)

    def finish(self) -> None:
        req = self.live.pop(self.rng.randrange(len(self.live)))
        self.cache.cache_finished_req(req)

    def chunk(self) -> None:
        self.cache.cache_unfinished_req(self.rng.choice(self.live))

    def decode(self) -> None:
        req = self.rng.choice(self.live)
        self.cache.extend_request(req, [self.rng.randrange(self.vocab) for _ in range(3)])

    def evict(self) -> None:
        self.cache.evict(self.rng.randrange(1, 40), mamba_num=self.rng.randrange(0, 4))

    def step(self) -> str:
        ops = ["admit", "evict"]
        if self.live:
            ops += ["finish", "finish", "chunk", "decode"]
        if len(self.live) >= self.max_running:
            ops = ["finish"]
        op = self.rng.choice(ops)
        getattr(self, op)()
        self.cache.check_hicache_events()
        return op

    def check(self) -> None:
        kv, states = self.outstanding()
        self.cache.sanity_check(kv, states)

    def drain(self) -> None:
        while self.live:
            self.finish()


def run_churn(cache: Any, seed: int, steps: int, check: bool = True) -> Churn:
    churn = Churn(cache, random.Random(seed))
    for _ in range(steps):
        churn.step()
        if check:
            churn.check()
    return churn
