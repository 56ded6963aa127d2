"""Tensor storage kept alive by views far smaller than it: ``tensor_pinned``.

A tensor view (``t[a:b]``) keeps the whole storage it was cut from allocated.
A structure that keeps small slices of large tensors (a tree node keeping its
slice of a request's KV indices, SGLang #17191; host indices cut from a free
list, #20271) holds memory many times what it uses, and that memory sits at a
level (bounded by what the structure holds), so no growth rate shows it once
the structure is full. This census reads it as a level every few seconds:

- every tensor the collector tracks, grouped by storage (device, data pointer);
- a storage's *owned* views: its tensors other than a base that only its views
  keep (PyTorch keeps a view's base object alive from C++; no Python object
  refers to it then, which its reference count shows against a probe base
  made the same way at start);
- ``tensor_pinned``: for each storage at least PIN_RATIO times its largest
  owned view, the bytes beyond that view, summed.

A healthy allocator that slices its free list pins at most the list's taken
head (SGLang's allocators do this too), which is bounded by the pool.

One pass walks every object the collector tracks (``gc.get_objects()``
and a type test, about 25 ms for 170,000 objects, however few are tensors;
the walk is bound by memory latency, one cache miss per object, so it cannot
be made much cheaper), so the next reading waits until the census's CPU time
so far (the dearer readings inside tracemalloc's windows included; the
one-off probe of two tensors at the start is not) is at most COST_SHARE of
the time since it started, and at least ``interval_s`` after the last.

Once QUIET_READINGS readings in a row found less than QUIET_BYTES pinned (a
healthy allocator's taken head: 0 to 3 KB on the fixed caches, against a
1 MB budget), each further reading waits until its own cost is QUIET_SHARE
of the wait; a reading that finds more returns to COST_SHARE at once, and the
credit the quiet readings left brings the next readings a second apart, so
a level that appears late is still held over two readings within seconds.
The fixed caches spend two thirds less on the census after their first few
seconds; pinning that starts late is seen up to one quiet interval later
(about 7 s at 35 ms a walk).

It starts counting once the program has imported torch (importing it here
would cost 1.5 s and 220 MB); a run that never did says so at the end.
"""

from __future__ import annotations

import gc
import itertools
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

from harness.worker.samplers.base import PeriodicSampler

# A storage this many times its largest owned view is pinned by views (here and in
# the owner search's tensor report at the end of a run).
PIN_RATIO = 4
COST_SHARE = 0.015  # the census may take at most this share of the run's time
QUIET_BYTES = 64 * 1024  # less pinned than this is nothing to watch closely
QUIET_READINGS = 3  # this many quiet readings in a row slow the census down...
QUIET_SHARE = 0.005  # ...to this share of each wait


@dataclass(frozen=True)
class Census:
    tensors: int
    storage_bytes: int
    pinned_bytes: int


def tensor_types(root: type) -> frozenset[type]:
    """``root`` and all its subclasses (``Parameter``, user subclasses)."""
    found, todo = {root}, [root]
    while todo:
        subclasses: list[type] = todo.pop().__subclasses__()
        for sub in subclasses:
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return frozenset(found)


def view_bytes(tensor: Any) -> int:
    return int(tensor.numel()) * int(tensor.element_size())


Groups = dict[tuple[str, int], list[Any]]  # (device, data pointer) -> [nbytes, tensors]


def tensors_among(objects: list[object], kinds: frozenset[type]) -> list[object]:
    """The objects whose type is one of ``kinds``.

    The walk is most of the census's cost and runs in C from start to end
    (list over compress over map), so it never lets go of the GIL: a recorded
    program's threads cannot run while every object is held by ``objects``, as
    objects they drop meanwhile would stay alive (seen: the tree's unlinked nodes
    counted as detached but alive). The caller drops ``objects`` as it returns."""
    return list(itertools.compress(objects, map(kinds.__contains__, map(type, objects))))


def group_by_storage(tensors: list[object]) -> tuple[Groups, dict[int, int]]:
    """``tensors`` by storage, and the ids of live views' bases.

    A function of its own so that no loop variable outlives it: the reference
    counts read next must see the same references on every tensor."""
    storages: Groups = {}
    bases: dict[int, int] = {}
    for obj in tensors:
        try:
            if obj.is_meta:  # type: ignore[attr-defined]
                continue
            storage = obj.untyped_storage()  # type: ignore[attr-defined]
            key = (str(obj.device), int(storage.data_ptr()))  # type: ignore[attr-defined]
            nbytes = int(storage.nbytes())
            base = obj._base  # type: ignore[attr-defined]
        except Exception:  # sparse, or a subclass without a storage
            continue
        if base is not None:
            bases[id(base)] = 0
        storages.setdefault(key, [nbytes, []])[1].append(obj)
    return storages, bases


def count_base_refs(storages: Groups, bases: dict[int, int]) -> None:
    """Each live base's reference count, into ``bases`` (held by: the object list,
    its group, the loop, the call; one more for every Python owner)."""
    for entry in storages.values():
        for tensor in entry[1]:
            if id(tensor) in bases:
                bases[id(tensor)] = sys.getrefcount(tensor)


def take_census(tensors: list[object], orphan_refs: int) -> Census:
    """Storage and pinned bytes of ``tensors`` (:func:`tensors_among` the live objects).

    ``orphan_refs``: the reference count :func:`count_base_refs` reads on a base
    that only its views keep (:func:`orphan_refcount`); a base with more has an owner.
    """
    storages, bases = group_by_storage(tensors)
    count_base_refs(storages, bases)
    pinned = total = count = 0
    for nbytes, sharing in storages.values():
        count += len(sharing)
        total += nbytes
        owned = [view_bytes(t) for t in sharing if bases.get(id(t), orphan_refs + 1) > orphan_refs]
        largest = max(owned, default=nbytes)
        if nbytes >= PIN_RATIO * max(largest, 1):
            pinned += nbytes - largest
    return Census(count, total, pinned)


def orphan_refcount(torch: Any, kinds: frozenset[type]) -> int:
    """What :func:`count_base_refs` reads on a base only its view keeps: measured on a
    probe made that way, since it depends on how PyTorch keeps such a base.

    The census's own references are the same whatever else it holds, so the probe
    and its base stand in for the walk of every object (a second census at start,
    about 60 ms on radix-steady)."""
    probe = torch.arange(PIN_RATIO * 4)[:1]
    base_id = id(probe._base)
    tensors = tensors_among([probe, probe._base], kinds)
    storages, bases = group_by_storage(tensors)
    count_base_refs(storages, bases)
    del probe
    return bases.get(base_id, 0)


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
            census = take_census(tensors, self._orphan_refs)
        cost = time.thread_time() - began
        self._spent_s += cost
        self._quiet = self._quiet + 1 if census.pinned_bytes < QUIET_BYTES else 0
        self._every.next_at = self._next_at(now, cost)
        self.sink.sample("tensors", now, ops=self.ops, tensor_pinned=census.pinned_bytes,
                         tensor_storage=census.storage_bytes, tensors=census.tensors,
                         cpu_s=round(cost, 4))

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
