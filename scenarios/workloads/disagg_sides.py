"""Which scheduler runs a load: one side of PD when it asks and the cache can, else one
engine (``scenarios.workloads.disagg``)."""

from __future__ import annotations

from collections.abc import Iterable

from scenarios.workloads.disagg import missing_calls
from scenarios.workloads.disagg_decode import DecodeScheduler
from scenarios.workloads.disagg_load import DECODE
from scenarios.workloads.disagg_prefill import PrefillScheduler
from scenarios.workloads.protocol import PrefixCache
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic


def make_scheduler(cache: PrefixCache, traffic: Traffic, load: Load, seed: int = 0,
                   regressions: Iterable[str] = ()) -> Scheduler:
    """The scheduler for ``load``: one side of PD when asked and the cache can, else one engine."""
    if load.disagg is None or missing_calls(cache, load) is not None:
        return Scheduler(cache, traffic, load, seed, regressions)
    side = DecodeScheduler if load.disagg.side == DECODE else PrefillScheduler
    return side(cache, traffic, load, seed, regressions)
