"""The workload's own gauges (list lengths, node counts, pool usage) at a fixed rate.

A gauge that raises or returns something that is not a finite number is
reported once as an event and dropped, so one broken gauge costs neither the
run nor the other gauges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness.api import Gauge
from harness.worker.samplers.base import Clock, Every, Sink


class GaugesSampler:
    name = "gauges"

    def __init__(self, gauges: Mapping[str, Gauge], interval_s: float = 0.5) -> None:
        self._gauges = dict(gauges)
        self._every = Every(interval_s)
        self._sink: Sink | None = None
        self._clock: Clock | None = None
        self._ops = 0

    def unavailable(self) -> str | None:
        return None if self._gauges else "the workload declares no gauges"

    def start(self, writer: Sink, clock: Clock) -> None:
        self._sink, self._clock = writer, clock
        self.read(clock())

    def poll(self, now: float, ops: int) -> None:
        self._ops = ops
        if self._every.due(now):
            self.read(now)

    def stop(self) -> None:
        if self._clock is not None:
            self.read(self._clock())

    def read(self, now: float) -> None:
        values: dict[str, float] = {}
        for name, gauge in list(self._gauges.items()):
            value = self._value(name, gauge, now)
            if value is not None:
                values[name] = value
        if values:
            assert self._sink is not None
            self._sink.sample("gauges", now, values=values, ops=self._ops)

    def _value(self, name: str, gauge: Gauge, now: float) -> float | None:
        try:
            value = float(gauge())
        except Exception as exc:
            self._drop(name, now, f"{type(exc).__name__}: {exc}")
            return None
        if not math.isfinite(value):
            self._drop(name, now, f"returned {value}")
            return None
        return value

    def _drop(self, name: str, now: float, why: str) -> None:
        del self._gauges[name]
        assert self._sink is not None
        self._sink.event("gauge_dropped", now, gauge=name, reason=why)
