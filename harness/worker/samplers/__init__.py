"""Samplers: one module each, behind the protocol in ``base``.

``SAMPLER_TYPES`` is the registry: the names a run config may list come from
it, and ``build_samplers`` makes the enabled ones in its order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.api import Gauge
from harness.worker.samplers.base import PeriodicSampler, Sampler
from harness.worker.samplers.garbage import GarbageSampler
from harness.worker.samplers.gauges import GaugesSampler
from harness.worker.samplers.gc_events import GcEventsSampler
from harness.worker.samplers.heap import HeapSampler
from harness.worker.samplers.malloc_trim import MallocTrimSampler
from harness.worker.samplers.objects import ObjectsSampler
from harness.worker.samplers.rss import RssSampler

if TYPE_CHECKING:  # the config names samplers from this registry: no import at run time
    from harness.config import RunConfig

# The order in which samplers start, poll and stop. It matters at the end: the
# gc hook goes first, the last heap, gauge and object readings come before the
# garbage window and the malloc_trim probe (both force a collection), and the
# RSS sampler stops last so its final sample follows the probe.
SAMPLER_TYPES = (
    GcEventsSampler, HeapSampler, GaugesSampler, ObjectsSampler, GarbageSampler,
    MallocTrimSampler, RssSampler,
)
SAMPLER_NAMES = tuple(kind.name for kind in SAMPLER_TYPES)


def build_samplers(config: RunConfig, gauges: Mapping[str, Gauge]) -> list[Sampler]:
    """The enabled samplers, in ``SAMPLER_TYPES`` order."""
    every = config.intervals
    made: list[Sampler] = [
        GcEventsSampler(every.gc_flush_s),
        HeapSampler(every.heap_s),
        GaugesSampler(gauges, every.gauges_s),
        ObjectsSampler(every.objects_s),
        GarbageSampler(every.garbage_s),
        MallocTrimSampler(),
        RssSampler(every.rss_s, every.uss_s),
    ]
    return [s for s in made if s.name in config.samplers]


__all__ = ["SAMPLER_NAMES", "SAMPLER_TYPES", "PeriodicSampler", "Sampler", "build_samplers"]
