"""Sampler costs measured in this process, on one live workload driven by the worker's loop.

Used by ``bench/sampler_overhead.py`` (part 2). Samplers are built by
``harness.worker.samplers.build_samplers`` at their default intervals, exactly as the
worker builds them, and the loop is ``harness.worker.loop.drive`` writing to a real
``SampleWriter``. Each continuous sampler's own CPU is measured directly:
every call into it goes through a proxy that adds up the calling thread's CPU
time, and the RSS sampler's guard thread is read by its CPU clock; that is its share
of the loop's CPU with every default sampler on (effects on the workload's
own speed, such as cache misses, are left to the paired worker runs). The
windowed ones (garbage, objects) are timed per call. Tracemalloc is compared
in ops per CPU second over short blocks rotated with blocks of none.
"""

from __future__ import annotations

import statistics
import threading
import time
import tracemalloc
from pathlib import Path

from harness.api import RunContext, Workload
from harness.config import RunConfig
from harness.control import StopRequest
from harness.registry import load_scenario
from harness.runfiles.samples import SampleWriter
from harness.worker.loop import Limits, drive
from harness.worker.samplers import SAMPLER_NAMES, Sampler, build_samplers, start_available
from harness.worker.samplers.base import Clock, Sink

CONTINUOUS = ("rss", "heap", "tensors", "gc", "gauges")
RSS_THREAD = "rss-guard"
TRACE_BLOCK_S = 1.0


class Timed:
    """A sampler whose calls add up the CPU time they take on the calling thread."""

    def __init__(self, inner: Sampler) -> None:
        self.inner, self.name, self.cpu_s = inner, inner.name, 0.0

    def unavailable(self) -> str | None:
        return self.inner.unavailable()

    def start(self, writer: Sink, clock: Clock) -> None:
        self.inner.start(writer, clock)  # one-off (the objects baseline): not counted

    def poll(self, now: float, ops: int) -> None:
        began = time.thread_time()
        self.inner.poll(now, ops)
        self.cpu_s += time.thread_time() - began

    def stop(self) -> None:
        self.inner.stop()


def worker_samplers(names: tuple[str, ...], workload: Workload, tmp: Path) -> list[Sampler]:
    """Samplers built the way the worker builds them (default intervals)."""
    config = RunConfig(scenario="-", rundir=str(tmp), samplers=names)
    return build_samplers(config, dict(workload.gauges()))


def thread_cpu_s(name: str) -> float:
    found = [t for t in threading.enumerate() if t.name == name and t.ident is not None]
    if not found:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(found[0].ident or 0))


def loop(
    workload: Workload, samplers: list[Sampler], seconds: float, sink: Sink
) -> tuple[int, float, float]:
    """Drive the worker's loop for ``seconds``: ops, process CPU s, RSS guard thread CPU s."""
    base = time.monotonic()

    def clock() -> float:
        return time.monotonic() - base

    started = start_available(samplers, sink, clock)  # as the worker does (memray may be absent)
    began, cpu, rss0 = clock(), time.process_time(), thread_cpu_s(RSS_THREAD)
    limits = Limits(began + seconds, None, 0.0, 1.0, clock, StopRequest())
    result = drive(workload, started, limits, sink, lambda now: None)
    spent, rss_s = time.process_time() - cpu, thread_cpu_s(RSS_THREAD) - rss0
    for sampler in started:
        sampler.stop()
    return result.ops, spent, rss_s


def shares(workload: Workload, seconds: float, sink: SampleWriter) -> dict[str, float]:
    """Each continuous sampler's CPU as a share of the loop's CPU, all defaults on."""
    timed = [Timed(s) for s in worker_samplers(SAMPLER_NAMES, workload, sink.path.parent)]
    _, spent, rss_thread = loop(workload, list(timed), seconds, sink)
    found = {t.name: t.cpu_s / spent for t in timed if t.name in CONTINUOUS}
    found["rss"] = found.get("rss", 0.0) + rss_thread / spent
    return found


def tracemalloc_cost(workload: Workload, block_s: float, rounds: int, sink: Sink) -> float:
    """``1 - traced/untraced`` ops per CPU second, median over rounds of two blocks."""
    costs = []
    for _ in range(rounds):
        ops, spent, _ = loop(workload, [], block_s, sink)
        tracemalloc.start()  # one frame, the default
        try:
            traced_ops, traced_spent, _ = loop(workload, [], block_s, sink)
        finally:
            tracemalloc.stop()
        costs.append(1.0 - (traced_ops / traced_spent) / (ops / spent))
    return statistics.median(costs)


def per_call_s(name: str, workload: Workload, sink: SampleWriter, calls: int) -> float:
    """Seconds per window of a windowed sampler, made due through ``poll`` each call."""
    (sampler,) = worker_samplers((name,), workload, sink.path.parent)
    now = [0.0]
    sampler.start(sink, lambda: now[0])
    times = []
    for _ in range(calls):
        now[0] += 3600.0  # always due
        began = time.perf_counter()
        sampler.poll(now[0], 0)
        times.append(time.perf_counter() - began)
    sampler.stop()
    return statistics.median(times)


def in_process(scenario: str, seconds: float, rounds: int, sink: SampleWriter) -> dict[str, float]:
    """CPU shares of the continuous samplers, tracemalloc's cost, seconds per window."""
    workload = load_scenario(scenario).build(RunContext(seed=0))
    try:
        loop(workload, [], 0.5, sink)  # warm the cache up
        found = shares(workload, seconds, sink)
        found["tracemalloc"] = tracemalloc_cost(workload, TRACE_BLOCK_S, rounds, sink)
        found["garbage_call_s"] = per_call_s("garbage", workload, sink, 3)
        found["objects_call_s"] = per_call_s("objects", workload, sink, 3)
        return found
    finally:
        workload.close()
