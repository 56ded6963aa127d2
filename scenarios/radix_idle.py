"""radix-idle: the plain radix cache with idle gaps in its load; no known leak.

A control for leaks that only show at idle. Under steady load a step rarely
ends with nothing running (a few times per thousand steps), so SGLang's idle
self-check hardly runs; here half of every cycle is idle, the check runs
hundreds of times a minute, and a pool slot lost or a lock never released
(#35270, #16067: gauges ``idle_pool_mismatch``, ``locked_while_idle``) shows
within seconds.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load

SCENARIO = cache_scenario(
    name="radix-idle",
    description="plain RadixCache, load with idle gaps (control for idle-only accounting leaks)",
    factory="refcache.factories:radix_cache",
    cache_options={"kv_size": 8192},
    load=Load(pattern="idle-gaps"),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
