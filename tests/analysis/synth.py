"""Synthetic series and runs whose answer is known, for the analysis tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.signal import lfilter

from harness.budgets import Budget, parse_budget
from harness.runfiles.rundata import FloatArray, RunData, Series

HOUR = 3600.0
MB = 1e6
PAGE = 4096.0  # RSS is counted in pages


def budgets(*texts: str) -> list[Budget]:
    """Budgets as a face hands them to the analysis: parsed where they were typed."""
    return [parse_budget(text) for text in texts]


def times(duration_s: float, hz: float) -> FloatArray:
    """Sample times in seconds: ``hz`` samples per second for ``duration_s``."""
    return np.arange(int(duration_s * hz), dtype=np.float64) / hz


def ar1(rng: np.random.Generator, n: int, phi: float, sd: float) -> FloatArray:
    """AR(1) noise with lag-1 correlation ``phi`` and stationary standard deviation ``sd``."""
    shocks = rng.normal(0.0, sd * np.sqrt(1.0 - phi**2), n)
    start = rng.normal(0.0, sd)
    noise: FloatArray = lfilter([1.0], [1.0, -phi], shocks, zi=[phi * start])[0]
    return noise


def linear(t: FloatArray, per_h: float, base: float = 1e9) -> FloatArray:
    return base + per_h / HOUR * t


def pages(v: FloatArray) -> FloatArray:
    """``v`` rounded down to whole pages, as /proc reports RSS."""
    return np.floor(v / PAGE) * PAGE


def settling(t: FloatArray, quick: float, slow: float, slow_tau_s: float) -> FloatArray:
    """A worker's start: ``quick`` bytes within about a second, then ``slow`` more that
    level off with time constant ``slow_tau_s`` (histories and caches filling up)."""
    rise: FloatArray = quick * (1 - np.exp(-t / 0.5)) + slow * (1 - np.exp(-t / slow_tau_s))
    return rise


def sawtooth(t: FloatArray, period_s: float, height: float) -> FloatArray:
    """Rises by ``height`` over each period, then drops back (a collection)."""
    return height * ((t % period_s) / period_s)


def run_data(
    rss: tuple[FloatArray, FloatArray] | None = None,
    *,
    gauges: Mapping[str, tuple[FloatArray, FloatArray]] | None = None,
    ops_per_s: float = 1000.0,
    gc_events: list[dict[str, Any]] | None = None,
    garbage_windows: list[dict[str, Any]] | None = None,
    object_windows: list[dict[str, Any]] | None = None,
    warmup_end_s: float | None = None,
    loop_end_s: float | None = None,
) -> RunData:
    """A RunData as the loader would build it; ops counted at the rss sample times."""
    run = RunData(header={"type": "header", "schema": "leak-harness/samples", "version": 1})
    if rss is not None:
        t, v = rss
        run.rss = Series(t, v, "B")
        run.ops = Series(t, t * ops_per_s, "ops")
    for name, (t, v) in (gauges or {}).items():
        run.gauges[name] = Series(t, v, "")
    run.gc_events = gc_events or []
    run.garbage_windows = garbage_windows or []
    run.object_windows = object_windows or []
    if warmup_end_s is not None:
        run.events.append({"type": "event", "name": "warmup_end", "t": warmup_end_s})
    if loop_end_s is not None:
        run.events.append({"type": "event", "name": "loop_end", "t": loop_end_s})
    return run


def gc_lines(
    duration_s: float, per_op: float, ops_per_s: float, gen2_every_s: float = 60.0
) -> list[dict[str, Any]]:
    """gc sampler lines: gen-0 summed each second, gen-2 every ``gen2_every_s``.

    Gen-0 lines carry 20% of the garbage made in their second and gen-2 lines
    the rest made since the previous gen-2, so the total is ``per_op`` per op.
    """
    lines: list[dict[str, Any]] = []
    for second in range(1, int(duration_s) + 1):
        made = per_op * ops_per_s
        lines.append(_gc(second, 0, 100, 0.2 * made, second * ops_per_s))
        if second % gen2_every_s == 0:
            lines.append(_gc(second, 2, 1, 0.8 * made * gen2_every_s, second * ops_per_s))
    return lines


def _gc(t: float, gen: int, count: int, collected: float, ops: float) -> dict[str, Any]:
    return {
        "type": "gc", "t": float(t), "gen": gen, "count": count, "collected": collected,
        "uncollectable": 0, "pause_s": 0.001 * count, "ops": ops,
    }
