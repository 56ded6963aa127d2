"""unified-exits: UnifiedRadixCache (full, Mamba and SWA) where requests leave by every path.

The exit load (``EXIT_LOAD``, ``scenarios.workloads.exits``); a path that
forgets something shows in the idle books, locks or per-request tables.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="unified-exits",
    description="UnifiedRadixCache with Mamba and SWA, short of KV; requests abort, time out, "
                "fail and are retracted",
    factory="refcache.factories:unified_cache",
    cache_options={"kv_size": 2048, "mamba_size": 48, "swa_size": 2048, "sliding_window": 64},
    load=EXIT_LOAD,
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
