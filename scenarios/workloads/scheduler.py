"""A small serving scheduler around the cache protocol.

One ``step`` is one scheduler iteration: new arrivals join the queue; queued
requests are admitted while the pools allow (``alloc_request`` matches and
locks the cached prefix and allocates the rest, evicting under pressure); long
prompts are inserted chunk by chunk through ``cache_unfinished_req``; every
running request decodes a few tokens (``extend_request``); finished ones go
back through ``cache_finished_req``; ``check_hicache_events`` runs every step,
idle or not (the PP-sync leak grew even when idle). ``step`` returns the number
of cache operations it made, the unit of the harness's per-op metrics.

Whenever a step ends with no request running (SGLang's idle: requests may still
wait if nothing fits), the scheduler runs the idle check of
``scenarios.workloads.health``. It also counts what a lock or accounting leak
does to it first: failed allocations, dropped and rejected requests.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from refcache.req import Req
from scenarios.workloads.health import IdleCheck
from scenarios.workloads.protocol import PrefixCache
from scenarios.workloads.traffic import Request, Traffic


@dataclass(frozen=True)
class Load:
    """How requests arrive and how much runs at once."""

    pattern: str = "steady"  # steady | bursts | idle-gaps
    arrivals_per_step: float = 1.0
    burst_every: int = 50  # steps between bursts (pattern "bursts")
    burst_size: int = 24
    idle_every: int = 200  # steps per cycle of busy then idle (pattern "idle-gaps")
    idle_fraction: float = 0.5
    idle_sleep_s: float = 0.001  # wall time an idle step takes
    max_running: int = 16
    # Arrivals beyond this many waiting are rejected (counted): a cache that stops
    # admitting (a lock leak filling the pool) must not grow the harness's own queue.
    max_waiting: int = 256
    chunk_size: int = 64  # prefill chunk: longer prompts go through cache_unfinished_req
    decode_per_step: int = 4
    # A diffusion LLM (dLLM) decodes a block of this many tokens at once (0: token by
    # token): the block gets its slots, then denoise_steps steps each rewrite all of its
    # ids in place and cache the request's progress (cache_unfinished_req), as SGLang's
    # dLLM mode does; after the last step the block settles.
    dllm_block: int = 0
    denoise_steps: int = 3

    def arrivals(self, step: int, carry: float) -> tuple[int, float]:
        """How many requests arrive at this step, and the fractional carry."""
        if self.pattern == "bursts":
            return (self.burst_size if step % self.burst_every == 0 else 0), 0.0
        if self.pattern == "idle-gaps" and self.idle(step):
            return 0, carry
        total = carry + self.arrivals_per_step
        return int(total), total - int(total)

    def idle(self, step: int) -> bool:
        busy = int(self.idle_every * (1.0 - self.idle_fraction))
        return self.pattern == "idle-gaps" and step % self.idle_every >= busy


@dataclass
class Running:
    req: Req
    request: Request
    prompt_len: int
    generated: list[int] = field(default_factory=list)
    denoise_left: int = 0  # dLLM: steps before the block in flight settles


class Scheduler:
    def __init__(self, cache: PrefixCache, traffic: Traffic, load: Load) -> None:
        self.cache, self.traffic, self.load = cache, traffic, load
        self.queue: deque[Request] = deque()
        self.running: list[Running] = []
        self.steps = 0
        self.finished = 0
        self.dropped = 0  # could not fit even with nothing else running
        self.rejected = 0  # arrived to a full queue (max_waiting)
        self.alloc_failures = 0  # alloc_request / extend_request calls that returned False
        self.idle_check = IdleCheck.for_cache(cache)
        self._carry = 0.0
        self._rid = 0

    def step(self) -> int:
        self.steps += 1
        arrivals, self._carry = self.load.arrivals(self.steps, self._carry)
        self._enqueue(arrivals)
        ops = self._admit() + self._decode()
        self.cache.check_hicache_events()
        if not self.running:
            self.idle_check.run(self.cache)
            if self.load.idle(self.steps):
                time.sleep(self.load.idle_sleep_s)
        return ops + 1

    def _enqueue(self, arrivals: int) -> None:
        for _ in range(arrivals):
            request = self.traffic.next_request()  # drawn even if rejected: same trace either way
            if len(self.queue) < self.load.max_waiting:
                self.queue.append(request)
            else:
                self.rejected += 1

    def _admit(self) -> int:
        ops = 0
        while self.queue and len(self.running) < self.load.max_running:
            request = self.queue[0]
            self._rid += 1
            req = Req(self._rid, list(request.prompt))
            ops += 1
            if not self.cache.alloc_request(req):
                self.alloc_failures += 1
                if not self.running:  # cannot fit even with everything evictable: drop it
                    self.queue.popleft()
                    self.dropped += 1
                break
            self.queue.popleft()
            if len(request.prompt) - req.prefix_len > self.load.chunk_size:
                self.cache.cache_unfinished_req(req)
                ops += 1
            self.running.append(Running(req, request, len(request.prompt)))
        return ops

    def _decode(self) -> int:
        ops = 0
        for run in list(self.running):
            ok = self._denoise(run) if self.load.dllm_block else self._next_tokens(run)
            ops += 1
            if not ok:
                self.alloc_failures += 1
            # a request out of memory finishes early, as a preemption would
            if not ok or (len(run.generated) >= run.request.output_len and not run.denoise_left):
                ops += self._finish(run)
        return ops

    def _draft(self, n: int) -> list[int]:
        return [self.traffic.rng.randrange(self.traffic.shape.vocab) for _ in range(n)]

    def _next_tokens(self, run: Running) -> bool:
        """Autoregressive decode: a few new tokens with their slots."""
        n = min(self.load.decode_per_step, run.request.output_len - len(run.generated))
        tokens = self._draft(n)
        ok = n == 0 or self.cache.extend_request(run.req, tokens)
        if ok:
            run.generated.extend(tokens)
        return ok

    def _denoise(self, run: Running) -> bool:
        """One dLLM step: open a block (its slots) or rewrite its ids, then cache progress."""
        block, req = self.load.dllm_block, run.req
        if not run.denoise_left:
            if len(run.generated) >= run.request.output_len:
                return True
            if not self.cache.extend_request(req, self._draft(block)):
                return False
            req.unsettled, run.denoise_left = block, self.load.denoise_steps
        else:
            req.token_ids[-block:] = self._draft(block)  # the same slots, new ids
        run.denoise_left -= 1
        if not run.denoise_left:
            req.unsettled = 0
            run.generated.extend(req.token_ids[-block:])
        self.cache.cache_unfinished_req(req)
        return True

    def _finish(self, run: Running) -> int:
        self.running.remove(run)
        self.cache.cache_finished_req(run.req)
        self.traffic.record_reply(run.request, run.generated)
        self.finished += 1
        return 1

    def drain(self) -> None:
        """Finish everything running (end of run: the cache should be idle)."""
        for run in list(self.running):
            self._finish(run)
