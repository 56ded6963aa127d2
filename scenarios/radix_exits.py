"""radix-exits: the plain RadixCache where requests also leave by every other path.

The exit load (``EXIT_LOAD``, ``scenarios.workloads.exits``); a path that
forgets something shows in the idle books, locks or per-request tables.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="radix-exits",
    description="plain RadixCache, short of KV; requests abort, time out, fail and are retracted",
    factory="refcache.factories:radix_cache",
    cache_options={"kv_size": 2048},
    load=EXIT_LOAD,
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
