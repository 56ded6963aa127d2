"""Cyclic garbage, counted by type and bytes in short ``DEBUG_SAVEALL`` windows.

A window sets the flag, collects, reads what the collector saved in
``gc.garbage``, then restores the flags, drops what it saved and collects
again. The window must stay short: left on, DEBUG_SAVEALL keeps the first
garbage alive and that keeps later garbage reachable, so a real leak stops
looking like garbage at all.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable

from harness.runfiles.records import Cycle, GarbageCensus, GarbageLine
from harness.worker.glibc import load_heap_reader
from harness.worker.heapgraph.cycles import explain_garbage
from harness.worker.heapgraph.tensor_views import storage_bytes
from harness.worker.samplers.base import PeriodicSampler, forced_collection

TOP_TYPES = 50  # types per line; the rest are summed under "<other>"
EXPLAIN_LIMIT = 3  # garbage objects whose cycle is explained per window
Explainer = Callable[[list[object], int], list[Cycle]]


class GarbageSampler(PeriodicSampler):
    name = "garbage"

    def __init__(
        self, interval_s: float = 30.0, explainer: Explainer | None = explain_garbage
    ) -> None:
        # The first window comes one interval in (the default): the end-of-run
        # window always runs, and a window at t=0 would only see the build's leftovers.
        super().__init__(interval_s)
        self._explainer = explainer
        self._heap, _ = load_heap_reader()

    def unavailable(self) -> str | None:
        if not hasattr(gc, "DEBUG_SAVEALL"):
            return "this interpreter's gc has no DEBUG_SAVEALL"
        return None

    def take(self, now: float, final: bool = False) -> None:
        flags = gc.get_debug()
        first = len(gc.garbage)  # keep whatever was there before us
        before = self._levels()
        with forced_collection():
            gc.set_debug(flags | gc.DEBUG_SAVEALL)
            try:
                collected = gc.collect()
                record = self._read(first)
            finally:
                gc.set_debug(flags)
                saved = len(gc.garbage) > first
                del gc.garbage[first:]
                # What it saved is garbage again and needs a second full collection
                # to go; a window that saved nothing (a healthy cache's, nearly
                # always) skips it, which halves the window's cost.
                freed = gc.collect() if saved else 0
        released = {k: max(0, before[k] - level) for k, level in self._levels().items()}
        line: GarbageLine = {
            "type": "garbage", "t": now, "ops": self.ops, "collected": collected,
            "freed": freed, "final": final, "released": released, **record,
        }
        self.sink.line(line)

    def _levels(self) -> dict[str, int]:
        """The exact signals a forced collection moves: C heap bytes, Python blocks.

        Read around each window so the analysis can add back what the harness's
        own collection released: a production process with rare gen-2
        collections would still hold it (see :mod:`harness.analysis.runview`).
        """
        levels = {"py_blocks": sys.getallocatedblocks()}
        if self._heap is not None:
            levels["heap"] = self._heap()
        return levels

    def _read(self, first: int) -> GarbageCensus:
        # A separate frame: every reference to the saved objects dies on return,
        # before the second collection.
        saved = gc.garbage[first:]
        counts, sizes = census(saved)
        record: GarbageCensus = {
            "count": len(saved),
            "by_type": top(counts),
            "bytes_by_type": top(sizes, order=counts),
            "bytes": sum(sizes.values()),
            "cycles": [],
        }
        if self._explainer is not None and saved:
            try:
                record["cycles"] = self._explainer(saved, EXPLAIN_LIMIT)
            except Exception as exc:  # an explainer bug must not end the run
                record["cycles_error"] = f"{type(exc).__name__}: {exc}"
        return record


def census(objects: list[object]) -> tuple[Counter[str], Counter[str]]:
    """Object count and bytes per type name; tensors add their storage once."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    storages: set[int] = set()
    for obj in objects:
        name = type(obj).__name__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj) + storage_bytes(obj, storages)
    return counts, sizes


def top(values: Counter[str], order: Counter[str] | None = None) -> dict[str, int]:
    """The TOP_TYPES largest entries (by ``order`` if given); the rest as ``<other>``."""
    ranking = order if order is not None else values
    keep = [name for name, _ in ranking.most_common(TOP_TYPES)]
    kept = {name: int(values[name]) for name in keep}
    rest = sum(values.values()) - sum(kept.values())
    if rest:
        kept["<other>"] = int(rest)
    return kept
