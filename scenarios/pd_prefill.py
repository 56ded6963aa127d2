"""pd-prefill: the prefill side of disaggregated prefill and decode, with HiCache storage.

SGLang's prefill server with HiCache (``refcache.disagg.PrefillCache``: a
HiRadixCache with a storage tier, prefetch started as a request enters the
bootstrap queue, and the metadata rows of PD). Requests bootstrap with a decode
peer (some fail, some are aborted in the bootstrap queue), wait (some are
aborted or time out there), run their prefill forward, then wait in the inflight
queue for the KV transfer (some transfers fail, some are aborted); the queues
are ``scenarios.workloads.disagg``'s.

Incidents (both at SGLang's scheduler sites, in ``scenarios.workloads.disagg_prefill``):
``pd-abort-waiting-metadata`` (SGLang #17483): a request aborted in the waiting
queue keeps its metadata row, a stale ``metadata_buffers`` entry at every idle
moment (and the rows run out); ``pd-bootstrap-failure-prefetch`` (SGLang #15439):
a failed or aborted bootstrap keeps its storage prefetch, a stale
``ongoing_prefetch`` entry holding host slots. Without the PD calls
(``alloc_metadata_buffer`` / ``free_metadata_buffer``) a cache runs as one engine
and the run's notes say so.
"""

import dataclasses

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone
from scenarios.workloads.disagg_load import PREFILL, DisaggLoad
from scenarios.workloads.exits import Exits
from scenarios.workloads.traffic import TrafficShape

# Aborts in the waiting queue; no running aborts (a prefill request runs one forward).
# The PD rates make each PD path many times a second; a failed bootstrap leaks only when
# its request's prefix had pages in storage (its prefetch started), so failures are
# common enough that one such request leaves in the first second of most seeds (at 6%
# one seed of five took 400 steps, and its cell 10.9 s to detect).
PD = DisaggLoad(side=PREFILL, bootstrap_steps=2, transfer_steps=2, abort_bootstrap=0.06,
                bootstrap_failure=0.10, abort_transfer=0.03, transfer_failure=0.03)
LOAD = dataclasses.replace(EXIT_LOAD, exits=Exits(abort_waiting=0.08),
                           disagg=PD)

SCENARIO = cache_scenario(
    name="pd-prefill",
    description="PD prefill side: HiRadixCache with storage prefetch and metadata rows; "
                "bootstraps and transfers fail and are aborted, waiting requests abort "
                "(SGLang #17483: an aborted waiting request's metadata row; #15439: a failed "
                "bootstrap's prefetch)",
    factory="refcache.factories:pd_prefill_cache",
    cache_options={
        "kv_size": 2048, "host_size": 4096, "storage_pages": 16384, "prefetch_threshold": 16,
        "prefetch_ticks": 4, "metadata_size": 32,
    },
    load=LOAD,
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=256),
    regressions=("pd-abort-waiting-metadata", "pd-bootstrap-failure-prefetch"),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0", "stale_request_entries: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
