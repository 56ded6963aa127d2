"""radix-steady: the plain radix cache under steady load; no known leak.

The control scenario: it measures the harness's own noise floor (RSS slope,
cyclic garbage) on a cache whose evictions create no reference cycles.
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    LONG_BUDGETS,
    cache_scenario,
    run_standalone,
)

SCENARIO = cache_scenario(
    name="radix-steady",
    description="plain RadixCache under steady prefix-sharing load (control, no known leak)",
    factory="refcache.factories:radix_cache",
    cache_options={"kv_size": 8192},
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
    long_budgets=LONG_BUDGETS,
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
