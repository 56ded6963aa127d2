"""himamba-stale-leaf: incident 2 on HiMambaRadixCache (host eviction on stale nodes).

Popular prefixes cross the write-through threshold and are backed up to a small
host pool; a full host pool makes ``write_backup`` call ``evict_host`` in the
middle of an insert. With ``himamba-stale-host-leaf`` a candidate can be a node
that is no longer its parent's child and the scheduler dies on the assertion
"parent does not have child key" (verdict ``crashed``). Fixed, the stale
candidates are dropped and counted (gauge ``stale_host_leaf_cleanups``).
"""

from scenarios.workloads.common import cache_scenario, run_standalone

SCENARIO = cache_scenario(
    name="himamba-stale-leaf",
    description="HiMambaRadixCache with a small host tier (incident 2: stale host leaves crash)",
    factory="refcache.factories:himamba_cache",
    cache_options={
        "kv_size": 8192,
        "mamba_size": 64,
        "host_size": 2048,
        "write_through_threshold": 2,
    },
    regressions=("himamba-stale-host-leaf",),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
