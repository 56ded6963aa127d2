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
        """KV slots and state slots the running requests hold outside the tree.

        A cache whose requests hold more than one kind of slot (SWA slots per
        token, several state pools) says so through ``held_by(req)``: a dict
        ``{"kv": n, <pool>: m, ...}``; the state count is then the sum over
        its non-KV pools.
        """
        if hasattr(self.cache, "held_by"):
            held = self.held()
            return held.pop("kv", 0), sum(held.values())
        kv = sum(len(r.kv_indices) - r.prefix_len for r in self.live)
        states = sum(1 for r in self.live if r.state_slot is not None)
        return kv, states

    def held(self) -> dict[str, int]:
        """Per pool, the slots running requests hold (caches with ``held_by``)."""
        totals: dict[str, int] = {}
        for req in self.live:
            for pool, n in self.cache.held_by(req).items():
                totals[pool] = totals.get(pool, 0) + n
        return totals

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

    def replay(self, ops: list[tuple[str, int]]) -> None:
        """Run (op name, seed) pairs, checking after each: a shrinkable form for hypothesis.

        Each op draws its randomness from its own seed; an op that cannot run
        (nothing live, or too many live) becomes ``admit`` or ``finish`` as in ``step``.
        """
        for op, seed in ops:
            self.rng.seed(seed)
            if not self.live and op not in ("admit", "evict"):
                op = "admit"
            if len(self.live) >= self.max_running:
                op = "finish"
            getattr(self, op)()
            self.check()

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
