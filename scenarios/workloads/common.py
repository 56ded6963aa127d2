"""The workload every cache scenario runs: traffic, a scheduler, a cache.

A scenario names a factory (``module:callable``) and its options; the user can
swap the factory with ``--target`` and override options from the run config
(``options = {"cache": {...}, "load": {...}, "traffic": {...}}``), which is how
tests run every scenario with tiny settings.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Mapping
from typing import Any

from harness.api import Gauge, RunContext, Scenario
from scenarios.workloads.protocol import PrefixCache
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.traffic import Traffic, TrafficShape

STATS_MAX_AGE_S = 0.05  # gauges sampled together share one stats() call


class CacheWorkload:
    """Drives one cache through the scheduler; exposes the cache's stats as gauges."""

    def __init__(
        self,
        ctx: RunContext,
        factory: str,
        cache_options: Mapping[str, Any],
        load: Load,
        shape: TrafficShape,
    ) -> None:
        options = {**cache_options, **ctx.options.get("cache", {})}
        load = dataclasses.replace(load, **ctx.options.get("load", {}))
        shape = dataclasses.replace(shape, **ctx.options.get("traffic", {}))
        self.cache: PrefixCache = ctx.factory(factory)(inject=ctx.inject, **options)
        self.scheduler = Scheduler(self.cache, Traffic.seeded(ctx.seed, shape), load)
        self._stats: dict[str, float] = {}
        self._stats_at = 0.0

    def step(self) -> int:
        return self.scheduler.step()

    def _stat(self, name: str) -> float:
        now = time.monotonic()
        if now - self._stats_at > STATS_MAX_AGE_S:
            self._stats, self._stats_at = self.cache.stats(), now
        return float(self._stats.get(name, 0.0))

    def gauges(self) -> Mapping[str, Gauge]:
        return {name: functools.partial(self._stat, name) for name in self.cache.stats()}

    def close(self) -> None:
        """Finish what runs, then SGLang's idle check: with no request running,
        tree, lists and pools must agree exactly."""
        try:
            self.scheduler.drain()
            self.cache.sanity_check()
        finally:
            self.cache.close()


def build_cache_workload(
    ctx: RunContext,
    factory: str,
    cache_options: Mapping[str, Any] | None = None,
    load: Load | None = None,
    shape: TrafficShape | None = None,
) -> CacheWorkload:
    return CacheWorkload(ctx, factory, cache_options or {}, load or Load(), shape or TrafficShape())


def cache_scenario(
    name: str,
    description: str,
    factory: str,
    cache_options: Mapping[str, Any],
    regressions: tuple[str, ...] = (),
    load: Load | None = None,
    budgets: tuple[str, ...] = ("rss: 50 MB/h", "cyclic_garbage: 0.5 /kop"),
    **timing: str,
) -> Scenario:
    """A Scenario whose workload is the scheduler over the named cache factory."""

    def build(ctx: RunContext) -> CacheWorkload:
        return build_cache_workload(ctx, factory, cache_options, load)

    return Scenario(
        name=name,
        description=description,
        build=build,
        regressions=regressions,
        budgets=budgets,
        **timing,
    )


def run_standalone(scenario: Scenario, argv: list[str] | None = None) -> int:
    """``python scenarios/mamba_lru.py [run options]`` is ``leak-harness run mamba-lru``."""
    from harness.cli import main

    return main(["run", scenario.name, *(sys.argv[1:] if argv is None else argv)])
