"""swa-exits: SWARadixCache where requests also leave by every other path.

Aborts while waiting (some already matched), timeouts, aborts and failures
mid-stream, and retraction when decode runs out of KV, in bursts with
decode-only stretches and idle moments between them (``EXIT_LOAD``). Each exit
path must give back everything the request holds: the idle check's books and
locks show a path that forgets one thing.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="swa-exits",
    description="SWARadixCache, short of KV; requests abort, time out, fail and are retracted",
    factory="refcache.factories:swa_cache",
    cache_options={"kv_size": 2048, "swa_size": 2048, "sliding_window": 64},
    load=EXIT_LOAD,
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
