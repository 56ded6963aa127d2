"""unified-lru: incident 1 on UnifiedRadixCache (one LRU list per component).

With ``unified-lru-unlink`` the per-component lists leave ``lru_prev[pt]`` /
``lru_next[pt]`` set on removed nodes; tombstoned components close cycles.
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    LONG_BUDGETS,
    cache_scenario,
    run_standalone,
)

SCENARIO = cache_scenario(
    name="unified-lru",
    description="UnifiedRadixCache (full+mamba+swa) under state pressure (incident 1)",
    factory="refcache.factories:unified_cache",
    cache_options={"kv_size": 16384, "mamba_size": 48, "swa_size": 2048, "sliding_window": 64},
    regressions=("unified-lru-unlink",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
    long_budgets=LONG_BUDGETS,
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
