"""hiradix-exits: HiRadixCache with host and storage tiers; requests leave by every path.

The exit load (``EXIT_LOAD``, ``scenarios.workloads.exits``) with quiet stretches
(``HOST_EXIT_LOAD``: what the books still count in transfer after one is held,
``held_in_transfer``, ``scenarios.workloads.quiet``); a path that forgets
something shows in the idle books, locks or per-request tables.

Storage prefetch is asynchronous here: it starts while the request waits and the
request is held until it is done (SGLang's ``wait_complete`` policy). With
``hiradix-abort-prefetch`` (SGLang #9874) an aborted or timed-out waiting request
leaves its prefetch behind: a stale ``ongoing_prefetch`` entry at every idle moment
(``stale_request_entries``), its host slots and host node ref never given back, and
``prefetch_tokens_occupied`` stuck at the capacity limit, so prefetch stops.
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
    name="hiradix-exits",
    description="HiRadixCache with host and storage tiers, asynchronous prefetch; requests "
                "abort, time out, fail and are retracted (SGLang #9874: an aborted request's "
                "prefetch)",
    factory="refcache.factories:hiradix_cache",
    # A host tier smaller than the storage below it, so that prefetches find pages the
    # host has lost; prefetches run while requests wait and take 4 event rounds.
    cache_options={
        "kv_size": 2048, "host_size": 4096, "storage_pages": 16384, "prefetch_threshold": 16,
        "prefetch_ticks": 4,
    },
    load=HOST_EXIT_LOAD,
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=256),
    regressions=("hiradix-abort-prefetch",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0", HELD_BUDGET,
             "stale_request_entries: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
