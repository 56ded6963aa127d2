"""mamba-lru: incident 1 on MambaRadixCache (LRU unlink leaves reference cycles).

Mamba state pressure tombstones internal nodes; with ``mamba-lru-unlink`` their
stale ``mamba_prev`` pointers close cycles with their evicted children, which
only a gen-2 collection frees. Signals: cyclic garbage per 1000 operations (GC
callbacks), detached-but-alive nodes, and RSS when gen-2 is rare (``--gc-mode
server``).
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    LONG_BUDGETS,
    cache_scenario,
    run_standalone,
)

SCENARIO = cache_scenario(
    name="mamba-lru",
    description="MambaRadixCache under mamba-state pressure (incident 1: LRU unlink cycles)",
    factory="refcache.factories:mamba_cache",
    cache_options={"kv_size": 16384, "mamba_size": 48},
    regressions=("mamba-lru-unlink",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
    long_budgets=LONG_BUDGETS,
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
