"""Samplers: one module each, behind the protocol in ``base``.

``REGISTRY`` is the one table of them: the names a run config may list come
from it, and ``build_samplers`` makes the enabled ones in its order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from harness.api import Gauge
from harness.worker.samplers.allocations import AllocationSampler
from harness.worker.samplers.base import Clock, PeriodicSampler, Sampler, Sink
from harness.worker.samplers.garbage import GarbageSampler
from harness.worker.samplers.gauges import GaugesSampler
from harness.worker.samplers.gc_events import GcEventsSampler
from harness.worker.samplers.heap import HeapSampler
from harness.worker.samplers.malloc_trim import MallocTrimSampler
from harness.worker.samplers.native import NativeSampler
from harness.worker.samplers.objects import ObjectsSampler
from harness.worker.samplers.owners import OwnersSampler
from harness.worker.samplers.rss import RssSampler
from harness.worker.samplers.tensors import TensorsSampler

if TYPE_CHECKING:  # the config names samplers from this registry: no import at run time
    from harness.config import RunConfig

# How to make one sampler from the run's config and gauges.
Factory = Callable[["RunConfig", Mapping[str, Gauge]], Sampler]

# The samplers, in the order in which they start, poll and stop. It matters at
# the end: the gc hook goes first, the last heap, gauge and object readings come
# before the garbage window and the malloc_trim probe (both force a collection),
# the owner search runs on what the workload left before the probe trims, and
# the RSS sampler stops last so its final sample follows the probe.
REGISTRY: tuple[tuple[str, Factory], ...] = (
    (GcEventsSampler.name, lambda c, g: GcEventsSampler(c.intervals.gc_flush_s)),
    (HeapSampler.name, lambda c, g: HeapSampler(c.intervals.heap_s)),
    (TensorsSampler.name, lambda c, g: TensorsSampler(c.intervals.tensors_s)),
    (GaugesSampler.name, lambda c, g: GaugesSampler(g, c.intervals.gauges_s)),
    (ObjectsSampler.name, lambda c, g: ObjectsSampler(c.intervals.objects_s)),
    (GarbageSampler.name, lambda c, g: GarbageSampler(c.intervals.garbage_s)),
    (AllocationSampler.name, lambda c, g: AllocationSampler(*allocation_windows(c))),
    (NativeSampler.name, lambda c, g: NativeSampler(*native_window(c))),
    (OwnersSampler.name, lambda c, g: OwnersSampler()),
    (MallocTrimSampler.name, lambda c, g: MallocTrimSampler()),
    (RssSampler.name, lambda c, g: RssSampler(c.intervals.rss_s, c.intervals.uss_s)),
)
# Allocation windows: two, at these fractions of the measured window, so growth in
# both tells a leak from a structure still filling; each at most ALLOC_SHARE of it.
ALLOC_AT = (0.25, 0.65)
ALLOC_SHARE = 1 / 12
NATIVE_AT = 0.45  # the native window (memray, when installed): between the two
NATIVE_MIN_SPAN_S = 10.0
OPS_ONLY_SPAN_S = 60.0  # where windows go when only an op count bounds the run
SAMPLER_NAMES = tuple(name for name, _ in REGISTRY)
# The samplers that only say where growth comes from (``--no-attribution`` drops them).
ATTRIBUTION_SAMPLERS = (AllocationSampler.name, NativeSampler.name, OwnersSampler.name)


def build_samplers(config: RunConfig, gauges: Mapping[str, Gauge]) -> list[Sampler]:
    """The enabled samplers, in ``REGISTRY`` order."""
    return [make(config, gauges) for name, make in REGISTRY if name in config.samplers]


def start_available(samplers: Sequence[Sampler], sink: Sink, clock: Clock) -> list[Sampler]:
    """Start the samplers that can run here; the others are an event with their reason."""
    started = []
    for sampler in samplers:
        reason = sampler.unavailable()
        if reason is not None:
            sink.event("sampler_unavailable", clock(), sampler=sampler.name, reason=reason)
            continue
        sampler.start(sink, clock)
        started.append(sampler)
    return started


def allocation_windows(config: RunConfig) -> tuple[list[float], float]:
    """Start times and length of the allocation windows, on the run's clock."""
    warm, span = _measured_span(config)
    length = min(config.intervals.alloc_window_s, span * ALLOC_SHARE)
    return [warm + at * span for at in ALLOC_AT], length


def native_window(config: RunConfig) -> tuple[float, float]:
    """Start time and length of the native window: as long as an allocation window.

    A run shorter than NATIVE_MIN_SPAN_S gets none (it would start at infinity):
    reading the capture takes seconds, which a short run cannot spare."""
    warm, span = _measured_span(config)
    start = warm + NATIVE_AT * span if span >= NATIVE_MIN_SPAN_S else math.inf
    return start, min(config.intervals.alloc_window_s, span * ALLOC_SHARE)


def _measured_span(config: RunConfig) -> tuple[float, float]:
    warm = config.warmup_s
    span = (config.duration_s - warm) if config.duration_s is not None else OPS_ONLY_SPAN_S
    return warm, max(span, 0.0)


__all__ = [
    "ATTRIBUTION_SAMPLERS", "REGISTRY", "SAMPLER_NAMES", "PeriodicSampler", "Sampler",
    "build_samplers", "native_window", "start_available",
]
