"""The workload's own gauges (list lengths, node counts, pool usage) at a fixed rate.

A gauge that raises or returns something that is not a finite number is
reported once as an event and dropped, so one broken gauge costs neither the
run nor the other gauges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness.api import Gauge
from harness.runfiles.records import GaugesLine
from harness.worker.samplers.base import PeriodicSampler


class GaugesSampler(PeriodicSampler):
    name = "gauges"

    def __init__(self, gauges: Mapping[str, Gauge], interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self._gauges = dict(gauges)

    def unavailable(self) -> str | None:
        return None if self._gauges else "the workload declares no gauges"

    def on_start(self, now: float) -> None:
        self.take(now)  # the level before the first step, then at once on the first poll

    def take(self, now: float, final: bool = False) -> None:
        values: dict[str, float] = {}
        for name, gauge in list(self._gauges.items()):
            value = self._value(name, gauge, now)
            if value is not None:
                values[name] = value
        if values:
            line: GaugesLine = {"type": "gauges", "t": now, "values": values, "ops": self.ops}
            self.sink.line(line)

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
        self.sink.event("gauge_dropped", now, gauge=name, reason=why)
