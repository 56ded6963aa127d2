"""hiradix-pp-sync: incident 3 on HiRadixCache with pipeline parallelism.

Two real ranks over gloo on 127.0.0.1; rank 1 lags. Every event round rank 0
``isend``s a clone of its count tensors and keeps the Work in ``work_list``.
With ``hiradix-pp-sync-no-drain`` the list is only reaped of completed Works,
which on gloo never complete before ``wait()``: ``work_list`` and RSS grow
without bound, even when idle. Fixed, the list is drained every round.
"""

from scenarios.workloads.common import DEFAULT_BUDGETS, cache_scenario, run_standalone
from scenarios.workloads.scheduler import Load

SCENARIO = cache_scenario(
    name="hiradix-pp-sync",
    description="HiRadixCache, PP=2 over gloo with a lagging rank (incident 3: work_list pile-up)",
    factory="refcache.factories:hiradix_cache",
    cache_options={
        "kv_size": 8192,
        "host_size": 16384,
        "pp_world_size": 2,
        "pp_lag_s": 0.002,
        "pp_payload": 32768,
    },
    regressions=("hiradix-pp-sync-no-drain",),
    load=Load(pattern="idle-gaps"),
    budgets=(*DEFAULT_BUDGETS, "work_list: <= 4"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
