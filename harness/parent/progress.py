"""The live progress line of ``leak-harness run``, drawn from the parent.

On a terminal it redraws one line in place (``\\r`` and erase-to-end) twice a
second; when stdout is a file or a pipe (a CI log) it prints a plain line every
``PLAIN_EVERY_S`` seconds instead, with no control characters, so a 30-minute
nightly cell shows it is alive. Past the duration the line says, once, that the
run is finishing and what that is (the samplers' last windows, the malloc_trim
probe, then the analysis) instead of counting on. At the start it says how long the
run is expected to take: the duration plus the measured cost of a run's start and end.
"""

from __future__ import annotations

from typing import TextIO

from harness.config import RunConfig
from harness.parent.supervisor import Snapshot
from harness.units import format_bytes, format_duration

MAX_GAUGES = 2  # more would wrap an 80-column line
PLAIN_EVERY_S = 10.0  # seconds between plain progress lines off a terminal
# A run's wall time beyond its --duration, measured on 2 cores at a load average of 5
# (2026-12-04, 20 s runs of radix-steady and mamba-lru): the interpreter and the build
# before the workload, the samplers' last windows and the malloc_trim probe after it,
# then the analysis and the report: 14 to 15 s. With --gc-mode server the last
# allocation window ends only once tracemalloc has stopped over the ballast heap: 27 s.
OVERHEAD_S = {"default": 15.0, "off": 15.0, "server": 27.0}
FINISHING = ("finishing: the workload has stopped; the samplers take their last windows "
             "(garbage, objects, allocations) and the malloc_trim probe, then the samples "
             "are analysed")


class ProgressLine:
    def __init__(self, stream: TextIO, name: str, live: bool) -> None:
        self.stream = stream
        self.name = name
        self.live = live
        self._drawn = False
        self._next_plain_s = PLAIN_EVERY_S
        self._finishing_said = False

    def begin(self, config: RunConfig) -> None:
        limit = f"{config.duration_s:g} s" if config.duration_s else f"{config.max_ops} ops"
        print(f"running {self.name} for {limit} in {config.rundir}{expected(config)}",
              file=self.stream, flush=True)

    def update(self, snap: Snapshot) -> None:
        if self.live:
            self.stream.write("\r\x1b[K" + render(self.name, snap))
            self.stream.flush()
            self._drawn = True
        elif finishing(snap):  # said once: it does not change while it lasts
            if not self._finishing_said:
                print(f"{self.name}  {snap.total_s:g}/{snap.total_s:g} s  {FINISHING}",
                      file=self.stream, flush=True)
                self._finishing_said = True
        elif snap.elapsed_s >= self._next_plain_s:
            print(render(self.name, snap), file=self.stream, flush=True)
            self._next_plain_s = snap.elapsed_s + PLAIN_EVERY_S

    def end(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def expected(config: RunConfig) -> str:
    """``"; expected wall time about 35 s (the duration + 15 s to start and finish)"``:
    empty for a run bounded by operations, whose length is not known ahead."""
    if not config.duration_s:
        return ""
    extra = OVERHEAD_S.get(config.gc_mode, OVERHEAD_S["default"])
    return (f"; expected wall time about {format_duration(config.duration_s + extra)} "
            f"(the duration + about {extra:g} s to start, take the last windows, analyse "
            "and report)")


def finishing(snap: Snapshot) -> bool:
    return bool(snap.total_s) and snap.elapsed_s > (snap.total_s or 0.0)


def render(name: str, snap: Snapshot) -> str:
    """``healthy  12.3/60 s  warmup  876 ops/s  RSS 20.6 MB  ring=256``"""
    if finishing(snap):  # short: a line redrawn in place must not wrap
        return f"{name}  {snap.total_s:g}/{snap.total_s:g} s  finishing: last windows, analysis"
    total = f"/{snap.total_s:g}" if snap.total_s else ""
    parts = [name, f"{snap.elapsed_s:.1f}{total} s"]
    if snap.phase == "warmup":
        parts.append("warm-up")
    parts.append(f"{snap.ops:,} ops ({snap.ops_per_s:,.0f}/s)")
    if snap.rss is not None:
        parts.append(f"RSS {format_bytes(snap.rss)}")
    gauges = list(snap.gauges.items())[:MAX_GAUGES]
    parts.extend(f"{key}={value:g}" for key, value in gauges)
    return "  ".join(parts)
