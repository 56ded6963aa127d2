"""himamba-exits: HiMambaRadixCache with a host tier where requests also leave by every other path.

The exit load (``EXIT_LOAD``, ``scenarios.workloads.exits``) with quiet stretches
(``HOST_EXIT_LOAD``: what the books still count in transfer after one is held,
``held_in_transfer``, ``scenarios.workloads.quiet``); a path that forgets
something shows in the idle books, locks or per-request tables.
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    HELD_BUDGET,
    HOST_EXIT_LOAD,
    cache_scenario,
    run_standalone,
)
from scenarios.workloads.traffic import TrafficShape

SCENARIO = cache_scenario(
    name="himamba-exits",
    description="HiMambaRadixCache with a host tier, short of KV; requests abort, time out, "
                "fail and are retracted",
    factory="refcache.factories:himamba_cache",
    cache_options={
        "kv_size": 2048, "mamba_size": 64, "host_size": 4096, "write_through_threshold": 2,
    },
    load=HOST_EXIT_LOAD,
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=128),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0", HELD_BUDGET),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
