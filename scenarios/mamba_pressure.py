"""mamba-pressure: MambaRadixCache short of KV, with idle gaps (incident 7, SGLang #16067).

The KV pool is small for the traffic, so admissions fail often (the scheduler
retries them later), and half of every load cycle is idle, so SGLang's idle
self-check runs hundreds of times a minute. With ``mamba-slot-failed-schedule``
a request whose KV allocation fails keeps the Mamba state slot it was given:
at the next idle moment the Mamba pool's books are a slot short per failure
(``idle_pool_mismatch``), what SGLang reports as ``leaked_mamba_pages`` before
it kills the server. RSS barely moves: a slot is a few hundred bytes.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load

SCENARIO = cache_scenario(
    name="mamba-pressure",
    description="MambaRadixCache short of KV, idle gaps (incident 7: Mamba slot kept by a "
                "request that failed to schedule, #16067)",
    factory="refcache.factories:mamba_cache",
    cache_options={"kv_size": 2048, "mamba_size": 48},
    load=Load(pattern="idle-gaps"),
    regressions=("mamba-slot-failed-schedule",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
