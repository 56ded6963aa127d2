"""swa-lru: incident 1 on SWARadixCache (LRU unlink leaves reference cycles).

A small SWA pool forces SWA tombstones of internal nodes; with
``swa-lru-unlink`` their stale ``swa_prev`` pointers close cycles once the
tombstone and its child are deleted.
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    LONG_BUDGETS,
    cache_scenario,
    run_standalone,
)

SCENARIO = cache_scenario(
    name="swa-lru",
    description="SWARadixCache under SWA-pool pressure (incident 1: LRU unlink cycles)",
    factory="refcache.factories:swa_cache",
    cache_options={"kv_size": 16384, "swa_size": 2048, "sliding_window": 64},
    regressions=("swa-lru-unlink",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
    long_budgets=LONG_BUDGETS,
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
