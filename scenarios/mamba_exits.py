"""mamba-exits: MambaRadixCache where requests also leave by every other path.

The exit load (``EXIT_LOAD``, ``scenarios.workloads.exits``); a path that
forgets something shows in the idle books, locks or per-request tables.

With ``mamba-abort-queued-slot`` (SGLang #12693) an aborted waiting request
drops the state slot its match forked: the Mamba pool's idle books come up
a slot short per such abort.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="mamba-exits",
    description="MambaRadixCache, short of KV; requests abort, time out, fail and are "
                "retracted (SGLang #12693: Mamba slot of an aborted queued request)",
    factory="refcache.factories:mamba_cache",
    cache_options={"kv_size": 2048, "mamba_size": 48},
    load=EXIT_LOAD,
    regressions=("mamba-abort-queued-slot",),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
