"""The samplers' own growth over thousands of polls, measured in a fresh process.

``python -m tests.harness.sampling_growth DIR`` polls every sampler 5000 times
on a fake clock (after 500 polls of warm-up), writing to ``DIR/samples.jsonl``,
and prints the growth of objects, traced bytes and RSS as one JSON line. A child
process keeps the heap small: the objects and garbage samplers walk it.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import objgraph
import psutil

from harness.runfiles.samples import SampleWriter
from harness.worker.samplers.base import Sampler
from harness.worker.samplers.garbage import GarbageSampler
from harness.worker.samplers.gauges import GaugesSampler
from harness.worker.samplers.gc_events import GcEventsSampler
from harness.worker.samplers.heap import HeapSampler
from harness.worker.samplers.malloc_trim import MallocTrimSampler
from harness.worker.samplers.objects import ObjectsSampler
from harness.worker.samplers.rss import RssSampler


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def all_samplers() -> list[Sampler]:
    """Every sampler that polls; the two that walk the heap every 50 s of the fake
    clock (each walk takes ~0.5 s under tracemalloc; 10 of each in 500 s repeat them)."""
    return [
        GcEventsSampler(1.0),
        HeapSampler(0.1),
        GaugesSampler({"level": lambda: 1.0}, 0.5),
        ObjectsSampler(50.0),
        GarbageSampler(50.0),
        MallocTrimSampler(),
        RssSampler(0.1, 1.0, guard_s=None),
    ]


def poll_all(samplers: list[Sampler], clock: FakeClock, polls: int) -> None:
    for i in range(polls):
        clock.now += 0.1
        for sampler in samplers:
            sampler.poll(clock.now, i)


def measure(folder: Path) -> dict[str, Any]:
    clock, writer = FakeClock(), SampleWriter(folder / "samples.jsonl")
    samplers = all_samplers()
    for sampler in samplers:
        sampler.start(writer, clock)
    poll_all(samplers, clock, 500)  # warm-up: first windows, lazily created caches
    gc.collect()
    objects_before = len(gc.get_objects())
    objgraph.growth(limit=50)  # objgraph's baseline
    rss_before = psutil.Process().memory_info().rss
    tracemalloc.start()
    traced_before = tracemalloc.get_traced_memory()[0]
    poll_all(samplers, clock, 5000)
    gc.collect()
    traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
    tracemalloc.stop()
    grown_types = objgraph.growth(limit=10)
    object_growth = len(gc.get_objects()) - objects_before
    rss_growth = psutil.Process().memory_info().rss - rss_before
    for sampler in samplers:
        sampler.stop()
    writer.close()
    return {"objects": object_growth, "traced_bytes": traced_growth, "rss_bytes": rss_growth,
            "types": grown_types}


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]))))
