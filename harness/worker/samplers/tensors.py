"""Tensor storage kept alive by views far smaller than it: ``tensor_pinned``.

A tensor view (``t[a:b]``) keeps the whole storage it was cut from allocated.
A structure that keeps small slices of large tensors (a tree node keeping its
slice of a request's KV indices, SGLang #17191; host indices cut from a free
list, #20271) holds memory many times what it uses, and that memory sits at a
level (bounded by what the structure holds), so no growth rate shows it once
the structure is full. This census reads it as a level every few seconds:
``tensor_pinned`` is the bytes beyond the largest owned view of every pinned
storage, as :mod:`harness.worker.heapgraph.tensor_views` groups and judges
them (a base only its views keep is told by its reference count).

A healthy allocator that slices its free list pins at most the list's taken
head (SGLang's allocators do this too), which is bounded by the pool.

One pass walks every object the collector tracks (``gc.get_objects()`` and
a type test, however few are tensors; the walk is bound by memory latency,
one cache miss per object, so it cannot be made much cheaper), so the next
reading waits until the census's CPU time so far (the dearer readings inside
tracemalloc's windows included; the one-off probe of two tensors at the
start is not) is at most COST_SHARE of the time since it started, and at
least ``interval_s`` after the last.

Once QUIET_READINGS readings in a row found less than QUIET_BYTES pinned (a
healthy allocator's taken head, far under the budget), each further reading
waits until its own cost is QUIET_SHARE of the wait; a reading that finds
more returns to COST_SHARE at once, and the credit the quiet readings left
brings the next readings a second apart, so a level that appears late is
still held over two readings within seconds; pinning that starts late is
seen up to one quiet interval later.

It starts counting once the program has imported torch (importing it here
would cost seconds and hundreds of MB); a run that never did says so at the end.
"""

from __future__ import annotations

import gc
import sys
import time
import warnings
from typing import Any

from harness.runfiles.records import TensorsLine
from harness.worker.heapgraph.tensor_views import (
    orphan_refcount,
    storage_levels,
    tensor_types,
    tensors_among,
)
from harness.worker.samplers.base import PeriodicSampler

COST_SHARE = 0.015  # the census may take at most this share of the run's time
QUIET_BYTES = 64 * 1024  # less pinned than this is nothing to watch closely
QUIET_READINGS = 3  # this many quiet readings in a row slow the census down...
QUIET_SHARE = 0.005  # ...to this share of each wait


class TensorsSampler(PeriodicSampler):
    name = "tensors"

    def __init__(self, interval_s: float = 1.0) -> None:
        super().__init__(interval_s)
        self._least_s = interval_s
        self._torch: Any = None
        self._kinds: frozenset[type] = frozenset()
        self._orphan_refs = 0
        self._began_at = 0.0  # the run's clock when the sampler started
        self._spent_s = 0.0  # the census's CPU time since (readings, not the probe)
        self._quiet = 0  # readings in a row that found less than QUIET_BYTES pinned

    def on_start(self, now: float) -> None:
        super().on_start(now)
        # The share is of the run since start: the wait for the first reading is
        # credit for it, so readings come as often as before their cost was known.
        self._began_at = now

    def take(self, now: float, final: bool = False) -> None:
        if self._torch is None and not self._find_torch():
            if final:  # a recorded program may import torch late, or never
                self.sink.event("signal_unavailable", now, signal="tensor_pinned",
                                reason="the program never imported torch")
            return
        # CPU time, not wall time: on a loaded machine the wall clock would stretch
        # the interval for waits that cost the workload nothing.
        began = time.thread_time()
        self._kinds = tensor_types(self._torch.Tensor)  # a subclass defined meanwhile
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated torch attributes met in the walk
            tensors = tensors_among(gc.get_objects(), self._kinds)
            census = storage_levels(tensors, self._orphan_refs)
        cost = time.thread_time() - began
        self._spent_s += cost
        self._quiet = self._quiet + 1 if census.pinned_bytes < QUIET_BYTES else 0
        self._every.next_at = self._next_at(now, cost)
        line: TensorsLine = {
            "type": "tensors", "t": now, "ops": self.ops, "tensor_pinned": census.pinned_bytes,
            "tensor_storage": census.storage_bytes, "tensors": census.tensors,
            "cpu_s": round(cost, 4),
        }
        self.sink.line(line)

    def _next_at(self, now: float, cost: float) -> float:
        """When the census's CPU time so far is COST_SHARE of the time since start;
        after QUIET_READINGS quiet readings, when ``cost`` is QUIET_SHARE of the wait.

        A share of the whole, not of each interval: the first readings (before
        their cost is known) and the dearer ones are paid back by waiting longer.
        Quiet readings are paced each on its own: paced on the whole at the
        lower share, the readings before would hold the next one back for
        twice the run so far."""
        if self._quiet >= QUIET_READINGS:
            return now + max(self._least_s, cost / QUIET_SHARE)
        return max(now + self._least_s, self._began_at + self._spent_s / COST_SHARE)

    def _find_torch(self) -> bool:
        """Start counting once the program has imported torch (never import it here)."""
        torch = sys.modules.get("torch")
        # A recorded program's main thread may be importing it while this one polls.
        if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
            return False
        if not isinstance(getattr(torch, "Tensor", None), type) or not hasattr(torch, "arange"):
            return False
        self._torch = torch
        self._kinds = tensor_types(torch.Tensor)
        self._orphan_refs = orphan_refcount(torch, self._kinds)
        return True
