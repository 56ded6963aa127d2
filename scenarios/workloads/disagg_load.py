"""How a disaggregated (PD) run hands requests between the prefill and decode engines.

Its own module, without imports from the scheduler, so that ``Load`` can carry it
(``Load.disagg``) and ``scenarios.workloads.disagg``, which subclasses the
scheduler, can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFILL, DECODE = "prefill", "decode"
# The PD exit paths, as the run's exit counters and stale-entry reports name them.
BOOTSTRAP_FAILURE = "bootstrap-failure"  # the peer never answers the bootstrap (KVPoll.Failed)
ABORT_BOOTSTRAP = "abort-bootstrap"  # aborted in the bootstrap (prefill) / prealloc (decode) queue
ABORT_TRANSFER = "abort-transfer"  # aborted while its KV is in transfer (inflight / transfer queue)
TRANSFER_FAILURE = "transfer-failure"  # the KV transfer fails (KVPoll.Failed after Transferring)
PD_PATHS = (ABORT_BOOTSTRAP, BOOTSTRAP_FAILURE, ABORT_TRANSFER, TRANSFER_FAILURE)


@dataclass(frozen=True)
class DisaggLoad:
    """One side of PD: how long the fake transfer backend takes, how often each path fails.

    Rates are shares of arriving requests, chosen so that each path is taken many
    times in a 20 s run (no production figures are published)."""

    side: str = PREFILL
    bootstrap_steps: int = 2  # steps a bootstrap (handshake) takes before it is answered
    transfer_steps: int = 2  # steps a KV transfer takes
    abort_bootstrap: float = 0.0
    bootstrap_failure: float = 0.0
    abort_transfer: float = 0.0
    transfer_failure: float = 0.0

    def __post_init__(self) -> None:
        if self.side not in (PREFILL, DECODE):
            raise ValueError(f"disagg side must be {PREFILL!r} or {DECODE!r}, got {self.side!r}")

    def rates(self) -> tuple[tuple[str, float], ...]:
        return ((ABORT_BOOTSTRAP, self.abort_bootstrap),
                (BOOTSTRAP_FAILURE, self.bootstrap_failure),
                (ABORT_TRANSFER, self.abort_transfer),
                (TRANSFER_FAILURE, self.transfer_failure))
