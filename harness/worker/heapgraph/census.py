"""The object census: live objects by type name, and which types grew between two.

Tracked objects are counted by type; objects the collector does not track (a
dict of scalars, a tuple of atoms) have no entry of their own, so they are
counted as what tracked objects refer to (per reference; the empty tuple and
atoms left out). Holders of many untracked objects are remembered at the
start, so the end can tell which one gained most of a type's growth.
"""

from __future__ import annotations

import gc
import heapq
import operator
from collections import Counter
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse, repeat

TOP_TYPES = 5  # grown types reported
MIN_GROWTH = 50  # a type that grew by fewer objects is not reported
# Types every program makes in passing: reported only when they grew by NOISE_MIN.
NOISE = frozenset({
    "function", "cell", "frame", "code", "method", "builtin_function_or_method",
    "method-wrapper", "weakref.ReferenceType", "weakref.ProxyType", "getset_descriptor",
    "member_descriptor", "wrapper_descriptor", "method_descriptor", "classmethod",
    "staticmethod", "property", "module", "type",
})
NOISE_MIN = 1000
CENSUS_CHUNK = 4096  # tracked objects whose referents are listed at once
UNTRACKED_LIMIT = 1_000_000  # tracked objects above which untracked ones are not counted
HOLDER_MIN = MIN_GROWTH // 2  # untracked objects one holder must refer to, to be a holder
HOLDERS_KEPT = 20  # biggest holders per untracked type remembered from the start
ATOMS = (int, float, complex, str, bytes, bool, type(None))
EMPTY_TUPLE: tuple[()] = ()

Timer = Callable[[], float]


@dataclass
class Census:
    """Objects by type name: the tracked ones, and untracked ones by reference
    (None when the heap was too large to count them)."""

    tracked: dict[str, int]
    untracked: dict[str, int] | None
    # untracked type -> {id(holder): count}: the objects referring to most of them
    holders: dict[str, dict[int, int]] = field(default_factory=dict)

    def total(self, name: str) -> int:
        return self.tracked.get(name, 0) + (self.untracked or {}).get(name, 0)


def type_name(kind: type) -> str:
    module = getattr(kind, "__module__", None)
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in (None, "builtins") else f"{module}.{name}"


def take_census() -> Census:
    """The counts now, with the biggest holders of untracked objects."""
    everything = gc.get_objects()
    try:
        tracked, untracked = count_types(everything)
        holders: dict[str, dict[int, int]] = {}
        if untracked is not None:
            for kind, top in big_holders(everything, None).items():
                holders[type_name(kind)] = {id(everything[i]): n for n, i in top}
    finally:
        del everything
    return Census(
        by_name(tracked), by_name(untracked) if untracked is not None else None, holders,
    )


def count_types(objects: Sequence[object]) -> tuple[Counter[type], Counter[type] | None]:
    """Tracked objects by type, and the untracked non-atoms they refer to (per reference).

    The second pass iterates over every reference in C; above UNTRACKED_LIMIT
    objects it costs too much and is skipped (None).
    """
    tracked: Counter[type] = Counter(map(type, objects))
    if len(objects) > UNTRACKED_LIMIT:
        return tracked, None
    untracked: Counter[type] = Counter()
    empty = 0
    for start in range(0, len(objects), CENSUS_CHUNK):
        refs = gc.get_referents(*objects[start:start + CENSUS_CHUNK])
        untracked.update(map(type, filterfalse(gc.is_tracked, refs)))
        empty += sum(map(operator.is_, refs, repeat(EMPTY_TUPLE)))
        del refs
    for atom in ATOMS:
        untracked.pop(atom, None)
    untracked[tuple] -= empty  # the empty tuple is one shared object
    return tracked, +untracked


def big_holders(
    objects: Sequence[object], kinds: Container[type] | None,
    timer: Timer | None = None, deadline: float = 0.0,
) -> dict[type, list[tuple[int, int]]]:
    """Per untracked type (of ``kinds``, or all), the HOLDERS_KEPT tracked objects
    referring to most of them, as ``(count, index in objects)``.

    Only objects with HOLDER_MIN referents or more can count; a cheap length check
    skips the rest. Stops at ``deadline`` when a ``timer`` is given.
    """
    found: dict[type, list[tuple[int, int]]] = {}
    get, is_tracked = gc.get_referents, gc.is_tracked
    for index, obj in enumerate(objects):
        if timer is not None and index % 4096 == 0 and timer() >= deadline:
            break
        refs = get(obj)
        if len(refs) < HOLDER_MIN:
            continue
        counts = Counter(map(type, filterfalse(is_tracked, refs)))
        del refs
        for kind, n in counts.items():
            if n < HOLDER_MIN or kind in ATOMS or (kinds is not None and kind not in kinds):
                continue
            top = found.setdefault(kind, [])
            if len(top) < HOLDERS_KEPT:
                heapq.heappush(top, (n, index))
            elif n > top[0][0]:
                heapq.heapreplace(top, (n, index))
    return found


def by_name(counts: Counter[type]) -> dict[str, int]:
    named: Counter[str] = Counter()
    for kind, n in counts.items():
        named[type_name(kind)] += n
    return dict(named)


def grown_types(before: Census, after: Census, top: int = TOP_TYPES) -> list[tuple[str, int]]:
    """The ``top`` type names that grew most (tracked and untracked together)."""
    names = set(after.tracked) | set(after.untracked or ())
    growth = {name: after.total(name) - before.total(name) for name in names}
    kept = [
        name for name, grew in growth.items()
        if grew >= (NOISE_MIN if name in NOISE else MIN_GROWTH)
    ]
    kept.sort(key=lambda name: (-growth[name], name))
    return [(name, growth[name]) for name in kept[:top]]
