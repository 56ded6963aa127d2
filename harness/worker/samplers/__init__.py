"""Samplers: one module each, behind the protocol in ``base``."""

from __future__ import annotations

from collections.abc import Mapping

from harness.api import Gauge
from harness.config import RunConfig
from harness.worker.samplers.base import Sampler
from harness.worker.samplers.garbage import GarbageSampler
from harness.worker.samplers.gauges import GaugesSampler
from harness.worker.samplers.gc_events import GcEventsSampler
from harness.worker.samplers.malloc_trim import MallocTrimSampler
from harness.worker.samplers.objects import ObjectsSampler
from harness.worker.samplers.rss import RssSampler


def build_samplers(config: RunConfig, gauges: Mapping[str, Gauge]) -> list[Sampler]:
    """The enabled samplers, in the order they start, poll and stop.

    The order matters at the end: the gc hook goes first, the garbage window
    and the malloc_trim probe run after the last gauge and object readings, and
    the RSS sampler stops last so its final sample follows the probe.
    """
    every = config.intervals
    made: list[Sampler] = [
        GcEventsSampler(every.gc_flush_s),
        GaugesSampler(gauges, every.gauges_s),
        ObjectsSampler(every.objects_s),
        GarbageSampler(every.garbage_s),
        MallocTrimSampler(),
        RssSampler(every.rss_s, every.uss_s),
    ]
    return [s for s in made if s.name in config.samplers]


__all__ = ["Sampler", "build_samplers"]
