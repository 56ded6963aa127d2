"""radix-overlap: the plain RadixCache under overlap scheduling, short of KV (incident 10).

The exit load (``EXIT_LOAD``) with SGLang's overlap scheduling
(``scenarios.workloads.overlap``): each step launches the next decode batch, one
token per request as SGLang decodes, whose slots are allocated at launch, before
the last batch's result is processed. Sixteen requests run at once in a 2,048-slot
pool, so decode runs out of KV and retracts requests, most of them with a batch in
flight: 590 to 750 retractions in a 20 s run (5 seeds), with about a thousand idle
moments between the bursts.

With ``overlap-retract-inflight-slot`` (SGLang #11981, issue #11970) the result
processing skips a retracted request before freeing its slot in that batch, as
v0.5.3.post3 did: one KV slot lost per such retraction, which the idle books show
(``idle_pool_mismatch``, SGLang's "token_to_kv_pool_allocator memory leak
detected!").
"""

import dataclasses

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone

OVERLAP_LOAD = dataclasses.replace(EXIT_LOAD, overlap=True, decode_per_step=1, max_running=16)

SCENARIO = cache_scenario(
    name="radix-overlap",
    description="plain RadixCache, short of KV, overlap scheduling; requests abort, time out, "
                "fail and are retracted with a batch in flight (SGLang #11981: the retracted "
                "request's in-flight slot)",
    factory="refcache.factories:radix_cache",
    cache_options={"kv_size": 2048},
    load=OVERLAP_LOAD,
    regressions=("overlap-retract-inflight-slot",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
