"""unified-hicache-exits: UnifiedRadixCache with a host tier (FULL+MAMBA), every exit path.

The exit load with quiet stretches (``HOST_EXIT_LOAD``: a copy never acknowledged
is held, ``held_in_transfer``, ``scenarios.workloads.quiet``) on the unified
cache with SGLang's HiCache built in (``refcache.unified_host``): write-through
of a node's KV and Mamba state, demotion to the host, load back when a request
starts from a host hit. The device pools are small (KV and Mamba states), so
load backs are often called off for lack of room. With
``unified-loadback-abort-mamba`` (SGLang #30986) the Mamba slot a called-off
load prepared for its request is never given back: the Mamba pool's idle
books come up short (``idle_pool_mismatch``), the slot ledger naming the
load back's prepare as the site that allocated the lost slots.

A cache without ``release_aborted_request`` or ``cache_finished_req(..,
is_insert)`` skips the paths that need them (said in the run's notes,
``exit_paths_not_taken``); without ``pool_accounting()`` the books are not read.
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
    name="unified-hicache-exits",
    description="UnifiedRadixCache with a host tier (FULL+MAMBA), short of KV and Mamba slots; "
                "requests abort, time out, fail and are retracted (SGLang #30986: a called-off "
                "load back's Mamba slot)",
    factory="refcache.factories:unified_hicache",
    cache_options={
        "kv_size": 2048, "mamba_size": 64, "host_size": 8192, "write_through_threshold": 2,
    },
    load=HOST_EXIT_LOAD,
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=128),
    regressions=("unified-loadback-abort-mamba",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0", HELD_BUDGET),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
