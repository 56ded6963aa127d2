"""Any registered scenario, wrapped to log the worker's CPU time against its op count.

``RunConfig(scenario="bench.cpu_clock:mamba_lru")`` runs ``mamba-lru`` unchanged,
except that every step appends ``(ops so far, process CPU seconds, wall
seconds)`` to a list that ``close()`` writes to ``<rundir>/cpu_clock.json``.
The overhead benchmark reads it to turn an op range into CPU and wall seconds:
ops per CPU second of the worker (all its threads, the RSS guard's included) is
what sampling costs, whatever other jobs on a shared machine do to wall time.
One ``process_time()`` and one ``perf_counter()`` call per step cost the same
with and without samplers.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping

from harness.api import Gauge, RunContext, Scenario, Workload
from harness.registry import load_scenario

LOG_FILE = "cpu_clock.json"


class CpuClocked:
    def __init__(self, inner: Workload, ctx: RunContext) -> None:
        self.inner, self.ctx = inner, ctx
        self.ops = 0
        self.log: list[tuple[int, float, float]] = [(0, time.process_time(), time.perf_counter())]

    def step(self) -> int:
        done = self.inner.step()
        self.ops += done
        self.log.append((self.ops, time.process_time(), time.perf_counter()))
        return done

    def gauges(self) -> Mapping[str, Gauge]:
        return self.inner.gauges()

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            if self.ctx.rundir is not None:
                (self.ctx.rundir / LOG_FILE).write_text(json.dumps(self.log))


def wrap(scenario: Scenario) -> Scenario:
    def build(ctx: RunContext) -> CpuClocked:
        return CpuClocked(scenario.build(ctx), ctx)

    return dataclasses.replace(scenario, build=build)


def __getattr__(attr: str) -> Scenario:
    """``bench.cpu_clock:mamba_lru`` is ``mamba-lru`` wrapped."""
    if attr.startswith("__"):
        raise AttributeError(attr)
    return wrap(load_scenario(attr.replace("_", "-")))
