"""unified-pp-sync: incident 3 on UnifiedRadixCache with pipeline parallelism.

The same pile-up as ``hiradix-pp-sync`` through the Unified cache's own event
round: with ``unified-pp-sync-no-drain`` the async sends are reaped
non-blocking at the end of the round and never complete on gloo.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load

SCENARIO = cache_scenario(
    name="unified-pp-sync",
    description="UnifiedRadixCache, PP=2 over gloo with a lagging rank (incident 3)",
    factory="refcache.factories:unified_cache",
    cache_options={
        "kv_size": 16384,
        "mamba_size": 64,
        "pp_world_size": 2,
        "pp_lag_s": 0.002,
        "pp_payload": 32768,
    },
    regressions=("unified-pp-sync-no-drain",),
    load=Load(pattern="idle-gaps"),
    budgets=(*DEFAULT_BUDGETS, "work_list: <= 4"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
