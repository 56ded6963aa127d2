"""himamba-stale-leaf: incident 2 on HiMambaRadixCache (host eviction on stale nodes).

Multi-turn chats whose working set (128 conversations) is far larger than the
device pool, so demoted prefixes come back from the host tier (gauge
``kv_tokens_loaded_back``), and a host tier half the device pool's size, full
of copies of nodes still on the device, so ``write_backup`` fails for lack of
room and calls ``evict_host`` in the middle of an insert. With
``himamba-stale-host-leaf`` (the write-backup path as 0.5.10 ran it) a failed
backup leaves a node without a copy under which a child gets one (gauge
``backup_gaps``); once that child is demoted, device eviction takes the node
without a copy for a leaf and SGLang's own check stops it: "non-leaf" in
``_evict_regular`` (verdict ``crashed``; the traceback PR #22062 quotes). Fixed,
backups stay a subtree at the root. Quiet stretches (``HOST_LOAD``): what the books
still count in transfer after one is held (``held_in_transfer``,
``scenarios.workloads.quiet``).
"""

from scenarios.workloads.common import (
    DEFAULT_BUDGETS,
    HELD_BUDGET,
    HOST_LOAD,
    cache_scenario,
    run_standalone,
)
from scenarios.workloads.traffic import TrafficShape

SCENARIO = cache_scenario(
    name="himamba-stale-leaf",
    description="HiMambaRadixCache with a small host tier (incident 2: stale host leaves crash)",
    factory="refcache.factories:himamba_cache",
    cache_options={
        "kv_size": 4096,
        "mamba_size": 64,
        "host_size": 2048,
        "write_through_threshold": 2,
    },
    regressions=("himamba-stale-host-leaf",),
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=128),
    load=HOST_LOAD,
    budgets=(*DEFAULT_BUDGETS, HELD_BUDGET),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
