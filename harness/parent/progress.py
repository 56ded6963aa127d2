"""The live progress line of ``leak-harness run``, drawn from the parent.

On a terminal it redraws one line in place (``\\r`` and erase-to-end) twice a
second; when stdout is a file or a pipe (a CI log) it prints a plain line every
``PLAIN_EVERY_S`` seconds instead, with no control characters, so a 30-minute
nightly cell shows it is alive. Past the duration the line says the run is
finishing (the worker's final windows and the analysis) instead of counting on.
"""

from __future__ import annotations

from typing import TextIO

from harness.config import RunConfig
from harness.parent.supervisor import Snapshot
from harness.units import format_bytes

MAX_GAUGES = 2  # more would wrap an 80-column line
PLAIN_EVERY_S = 10.0  # seconds between plain progress lines off a terminal


class ProgressLine:
    def __init__(self, stream: TextIO, name: str, live: bool) -> None:
        self.stream = stream
        self.name = name
        self.live = live
        self._drawn = False
        self._next_plain_s = PLAIN_EVERY_S

    def begin(self, config: RunConfig) -> None:
        limit = f"{config.duration_s:g} s" if config.duration_s else f"{config.max_ops} ops"
        if not self.live:
            print(f"running {self.name} for {limit} in {config.rundir}", file=self.stream)

    def update(self, snap: Snapshot) -> None:
        if self.live:
            self.stream.write("\r\x1b[K" + render(self.name, snap))
            self.stream.flush()
            self._drawn = True
        elif snap.elapsed_s >= self._next_plain_s:
            print(render(self.name, snap), file=self.stream, flush=True)
            self._next_plain_s = snap.elapsed_s + PLAIN_EVERY_S

    def end(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def render(name: str, snap: Snapshot) -> str:
    """``healthy  12.3/60 s  warmup  876 ops/s  RSS 20.6 MB  ring=256``"""
    if snap.total_s and snap.elapsed_s > snap.total_s:
        return f"{name}  {snap.total_s:g}/{snap.total_s:g} s  finishing: final windows and analysis"
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
