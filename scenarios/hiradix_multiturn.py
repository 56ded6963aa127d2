"""hiradix-multiturn: HiRadixCache with a storage tier under multi-turn load (incident 5).

SGLang #19332 (fixed by #21624): multi-turn chats on HiCache with a storage
backend. Every new request first prefetches its new tokens from storage: the
host pool hands out a view of its free list for them, and a turn that is not
stored yet is revoked, its slots released and freed at the next event round,
which replaces the free list by a new concatenated tensor. Popular prefixes
are written through to the host (``write_backup``) and then to storage. Fixed,
a node keeps a copy of its host indices; with ``hiradix-host-indices-view`` it
keeps the view, which keeps the whole free-list storage it was cut from alive,
one per free-list generation: the C heap grows steadily while the host pool
has room (a large host tier, as in production), and "Where it grows" shows
tensor storages kept by far smaller views on ``TreeNode.host_value``. Quiet stretches
(``HOST_LOAD``): what the books still count in transfer after one is held
(``held_in_transfer``, ``scenarios.workloads.quiet``).
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    HELD_BUDGET,
    HOST_LOAD,
    LONG_BUDGETS,
    cache_scenario,
    run_standalone,
)
from scenarios.workloads.traffic import TrafficShape

SCENARIO = cache_scenario(
    name="hiradix-multiturn",
    description="HiRadixCache with a large host tier and a storage tier, multi-turn chats "
                "(incident 5: host indices kept as views of the free list)",
    factory="refcache.factories:hiradix_cache",
    cache_options={
        "kv_size": 8192,
        "host_size": 131072,
        "storage_pages": 16384,
        "prefetch_threshold": 16,
    },
    regressions=("hiradix-host-indices-view",),
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=256),
    load=HOST_LOAD,
    budgets=(*DEFAULT_BUDGETS, HELD_BUDGET),
    long_budgets=LONG_BUDGETS,
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
