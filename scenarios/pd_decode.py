"""pd-decode: the decode side of disaggregated prefill and decode.

SGLang's decode server with its radix cache (``refcache.disagg.DecodeCache``: a
RadixCache with the metadata rows and request rows of PD). Requests wait in the
prealloc queue for their handshake (some fail, some are aborted there), get a
request row, a metadata row and their KV preallocated, wait in the transfer queue
(some transfers fail, some are aborted), then wait (some are aborted there) and
decode (some are aborted or fail mid-stream); the queues are
``scenarios.workloads.disagg``'s. Every exit must give back the rows and the
preallocated KV: the idle books (``metadata``, ``req_slots``, ``full``) and the
per-request tables (``metadata_buffers``, ``req_slots``) judge it. No incident of
its own: SGLang's PD metadata incidents so far were on the prefill side
(``pd-prefill``). Without the PD calls (``alloc_metadata_buffer``,
``free_metadata_buffer``, ``alloc_req_slot``, ``free_req_slot``) a cache runs as
one engine and the run's notes say so.
"""

import dataclasses

from scenarios.workloads.common import DEFAULT_BUDGETS, EXIT_LOAD, cache_scenario, run_standalone
from scenarios.workloads.disagg_load import DECODE, DisaggLoad
from scenarios.workloads.exits import Exits
from scenarios.workloads.traffic import TrafficShape

PD = DisaggLoad(side=DECODE, bootstrap_steps=2, transfer_steps=3, abort_bootstrap=0.04,
                bootstrap_failure=0.04, abort_transfer=0.04, transfer_failure=0.04)
# Retraction is off: SGLang's decode retracts into its own CPU-offload queue, not modelled.
LOAD = dataclasses.replace(
    EXIT_LOAD, exits=Exits(abort_waiting=0.05, abort_running=0.05, fail_running=0.02),
    disagg=PD)

SCENARIO = cache_scenario(
    name="pd-decode",
    description="PD decode side: RadixCache with metadata rows, request rows and "
                "preallocated KV; handshakes and transfers fail and are aborted, waiting and "
                "running requests abort",
    factory="refcache.factories:pd_decode_cache",
    cache_options={"kv_size": 4096, "metadata_size": 32, "req_slots": 24},
    load=LOAD,
    shape=TrafficShape(mix=(0.15, 0.55, 0.05, 0.25), conversations=256),
    budgets=(*DEFAULT_BUDGETS, "detached_alive_nodes: <= 0", "stale_request_entries: <= 0"),
)

if __name__ == "__main__":
    raise SystemExit(run_standalone(SCENARIO))
