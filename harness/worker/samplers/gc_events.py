"""Garbage-collector activity from ``gc.callbacks``: continuous and cheap.

Every gen-2 (full) collection gets its own ``gc`` line: they are rare and they
are the signal (a broken LRU shows as frequent gen-2 collections each freeing
tens of thousands of objects). Gen-0/1 collections happen thousands of times a
second, so they are summed per flush interval into one line per generation,
with ``count`` collections in it, to keep the file small.

The callback only appends a tuple to a deque: it must not take the writer's
lock (a collection can start inside ``write``) and must not allocate much.
Collections the harness forces itself (garbage windows, probes) are skipped.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from harness.runfiles.records import GcLine
from harness.worker.samplers.base import PeriodicSampler, harness_is_collecting

# If the main loop stalls, keep the newest collections and drop the oldest
# instead of growing without bound (the sampler must never become the leak).
MAX_PENDING = 100_000
Pending = tuple[int, int, int, float, float]  # gen, collected, uncollectable, pause_s, t


class GcEventsSampler(PeriodicSampler):
    name = "gc"

    def __init__(self, flush_interval_s: float = 1.0) -> None:
        super().__init__(flush_interval_s)
        self._pending: deque[Pending] = deque(maxlen=MAX_PENDING)
        self._began = 0.0

    def unavailable(self) -> str | None:
        if not hasattr(gc, "callbacks"):
            return "this interpreter has no gc.callbacks"
        return None

    def on_start(self, now: float) -> None:
        super().on_start(now)
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        super().stop()

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if harness_is_collecting():
            return
        if phase == "start":
            self._began = time.perf_counter()
            return
        pause = time.perf_counter() - self._began
        self._pending.append(
            (info["generation"], info["collected"], info["uncollectable"], pause, self.now())
        )

    def take(self, now: float, final: bool = False) -> None:
        """Write the collections seen since the last flush."""
        young = {0: Totals(), 1: Totals()}
        while self._pending:
            gen, collected, uncollectable, pause, t = self._pending.popleft()
            if gen == 2:
                self._write(t, 2, Totals(1, collected, uncollectable, pause, pause))
            else:
                young[gen].add(collected, uncollectable, pause)
        for gen, totals in young.items():
            if totals.count:
                self._write(now, gen, totals)

    def _write(self, t: float, gen: int, totals: Totals) -> None:
        line: GcLine = {
            "type": "gc", "t": t, "gen": gen, "count": totals.count,
            "collected": totals.collected, "uncollectable": totals.uncollectable,
            "pause_s": round(totals.pause_s, 6), "max_pause_s": round(totals.max_pause_s, 6),
            "ops": self.ops,
        }
        self.sink.line(line)


@dataclass
class Totals:
    """Collections of one generation summed over a flush interval."""

    count: int = 0
    collected: int = 0
    uncollectable: int = 0
    pause_s: float = 0.0
    max_pause_s: float = 0.0

    def add(self, collected: int, uncollectable: int, pause: float) -> None:
        self.count += 1
        self.collected += collected
        self.uncollectable += uncollectable
        self.pause_s += pause
        self.max_pause_s = max(self.max_pause_s, pause)
