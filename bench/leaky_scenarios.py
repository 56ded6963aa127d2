"""Bench-only scenarios that leak a known number of bytes per operation.

An operation is a little pure-Python work (a dict and a list built and
dropped, as a request handler would); every operation also leaks
``bytes_per_op`` bytes, appended to one bytearray that is never emptied.
``bytes_per_op`` is fixed at build time from a short calibration of this
machine's ops/s, so that the leak comes to the scenario's nominal rate per
hour of wall time. The gauge ``leaked_bytes`` counts what was appended: the
truth the harness's estimate is compared with.

Why one growing buffer rather than many small objects: the buffer starts
above glibc's mmap threshold, so it grows by ``mremap`` and every appended
byte is a new resident byte. Small objects first fill the free space left in
the heap, which RSS cannot see (measured: 4 KiB chunks at 20 MB/h left RSS
flat for a whole minute); that is the allocator's behaviour, not an error of
the estimate, so it has no place in an accuracy benchmark.

Load one by spec: ``RunConfig(scenario="bench.leaky_scenarios:LEAK_200MB")``.
``STEADY`` does the same work and leaks nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from harness.api import Gauge, RunContext, Scenario

OPS_PER_STEP = 100
CALIBRATE_S = 0.5
START_BYTES = 4 << 20  # well above the mmap threshold (128 KiB, adaptive up to 32 MiB)
FILL = 0xA5
RATES = {"LEAK_20MB": 20e6, "LEAK_100MB": 100e6, "LEAK_200MB": 200e6, "LEAK_1GB": 1e9,
         "LEAK_2GB": 2e9}


def one_op(i: int) -> int:
    """A request handler's worth of short-lived objects."""
    tokens = list(range(i % 16, i % 16 + 24))
    record = {"id": i, "tokens": tokens, "meta": {"k": str(i)}}
    return len(tokens) + len(record)


class LeakyWorkload:
    def __init__(self, bytes_per_h: float) -> None:
        self.kept = bytearray([FILL]) * START_BYTES  # written, so resident before t=0
        self._owed = 0.0
        self._i = 0
        ops_per_s = self._calibrate()
        self.bytes_per_op = bytes_per_h / 3600.0 / ops_per_s

    def _calibrate(self) -> float:
        ops, began = 0, time.perf_counter()
        while time.perf_counter() - began < CALIBRATE_S:
            ops += self._work()
        return ops / (time.perf_counter() - began)

    def _work(self) -> int:
        for _ in range(OPS_PER_STEP):
            one_op(self._i)
            self._i += 1
        return OPS_PER_STEP

    def step(self) -> int:
        ops = self._work()
        self._owed += ops * self.bytes_per_op
        whole = int(self._owed)
        if whole:
            self.kept += bytes([FILL]) * whole
            self._owed -= whole
        return ops

    def gauges(self) -> Mapping[str, Gauge]:
        return {"leaked_bytes": lambda: float(len(self.kept) - START_BYTES)}

    def close(self) -> None:
        self.kept = bytearray()


def leaky(name: str, bytes_per_h: float) -> Scenario:
    def build(ctx: RunContext) -> LeakyWorkload:
        return LeakyWorkload(bytes_per_h)

    return Scenario(
        name=name,
        description=f"bench: leaks {bytes_per_h / 1e6:g} MB/h into a bytearray",
        build=build,
        default_duration="90s",
        check_duration="60s",
        warmup="5s",
        budgets=("rss: 50 MB/h",),
    )


STEADY = leaky("steady", 0.0)
LEAK_20MB = leaky("leak-20mb", RATES["LEAK_20MB"])
LEAK_100MB = leaky("leak-100mb", RATES["LEAK_100MB"])
LEAK_200MB = leaky("leak-200mb", RATES["LEAK_200MB"])
LEAK_1GB = leaky("leak-1gb", RATES["LEAK_1GB"])
LEAK_2GB = leaky("leak-2gb", RATES["LEAK_2GB"])
