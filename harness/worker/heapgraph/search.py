"""The backward search: from objects to the nearest root, over ``gc.get_referrers``.

Breadth-first and batched: every chain under way advances one level at a
time, and the objects at one level go to ``gc.get_referrers`` together in
batches of BATCH, so a level costs one heap scan per batch for all chains
rather than one per object. :class:`Search` holds what every step needs: the
roots, the ids of containers that are the search's own (never owners), the
deadline and the clock.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.worker.heapgraph.roots import Roots

BATCH = 128  # objects per gc.get_referrers scan (its cost grows with the batch: a linear check)
# Referrers followed per object and referrer type: a tree node's children all refer
# to it, and a shared object has thousands of referrers; one of a kind is enough to
# find the way up, a few keep the search from betting on one.
MAX_FANIN = 4
MAX_VISITED = 20_000  # objects one chain's search may hold
NO_REFERRER = "no referrer the GC sees (C code, or a running function's temporaries)"

Referrers = Callable[..., list[Any]]
Timer = Callable[[], float]


@dataclass
class Found:
    """A chain, as strings only: what leaves the search."""

    path: str | None
    root: str | None
    depth: int | None = None
    why: str | None = None
    holds: int | None = None  # entries of the container holding the object (0: none)


@dataclass
class Chains:
    """Per target: its chain of objects from a root down (or None), the root, why none."""

    chains: list[list[object] | None]
    roots: list[str | None]
    why: list[str | None]
    gave_up: bool


def is_args(referrer: object, batch: Sequence[object]) -> bool:
    """The argument tuple of a wrapper around ``gc.get_referrers`` (the collector
    leaves out only its own)."""
    return (
        type(referrer) is tuple and len(referrer) == len(batch)
        and all(a is b for a, b in zip(referrer, batch, strict=True))
    )


class _Chase:
    """One target's breadth-first search back to the nearest root."""

    __slots__ = ("child", "dead", "end", "fanin", "frontier", "full", "held", "next", "root",
                 "target")

    def __init__(self, target: object, mine: set[int]) -> None:
        self.target = target
        self.held: dict[int, object] = {id(target): target}  # keeps ids valid
        self.child: dict[int, int] = {}  # id(referrer) -> id(what it refers to, nearer the target)
        self.frontier: list[object] = [target]
        self.next: list[object] = []
        self.fanin: Counter[tuple[int, type]] = Counter()
        self.end: object = None  # the root object reached
        self.root: str | None = None
        self.dead: object = None  # the first object with no referrer at all
        self.full = False
        mine.update((id(self), id(self.held), id(self.frontier), id(self.next)))

    def offer(self, referrer: object, node: object, roots: Roots) -> None:
        if self.root is not None or id(referrer) in self.held:
            return
        fanin = (id(node), type(referrer))
        if self.fanin[fanin] >= MAX_FANIN or len(self.held) >= MAX_VISITED:
            self.full = True
            return
        self.fanin[fanin] += 1
        self.held[id(referrer)] = referrer
        self.child[id(referrer)] = id(node)
        root = roots.of(referrer)
        if root is not None:
            self.end, self.root = referrer, root
        else:
            self.next.append(referrer)

    def chain(self, start: object) -> list[object]:
        """The objects from ``start`` down to the target."""
        nodes = [start]
        at = id(start)
        while at != id(self.target):
            at = self.child[at]
            nodes.append(self.held[at])
        return nodes


class Search:
    """The shared state of one round of searches.

    ``mine``: ids of containers the caller and the search hold (the targets'
    list, the search's own levels), never taken for owners; the search adds
    its own to a copy, dropped with this object, since a freed container's id
    may come back as an instance ``__dict__`` that naming a path creates.
    ``extra``: referrers the collector cannot see, by id of what they hold
    (the views that keep a base tensor). Referrers of a type in
    ``blind_types`` (the harness's samplers, which hold the gauges) are no owners.
    """

    def __init__(
        self, roots: Roots, deadline: float, timer: Timer, referrers: Referrers,
        ignore: Iterable[int] = (), extra: Mapping[int, list[object]] | None = None,
        blind_types: tuple[type, ...] = (),
    ) -> None:
        self.roots = roots
        self.deadline = deadline
        self.timer = timer
        self.referrers = referrers
        self.extra: Mapping[int, list[object]] = extra or {}
        self.blind_types = blind_types
        self.mine: set[int] = set(ignore)
        self.mine.add(id(self.mine))

    def chains(self, targets: list[object], max_depth: int) -> Chains:
        """Each target's chain from a root, searched together level by level."""
        mine = self.mine
        chases = [_Chase(target, mine) for target in targets]
        mine.add(id(chases))
        for chase in chases:
            root = self.roots.of(chase.target)
            if root is not None:
                chase.end, chase.root = chase.target, root
        gave_up = False
        for _ in range(max_depth):
            active = [c for c in chases if c.root is None and c.frontier]
            if not active:
                break
            gave_up = self._level(active)
            for chase in active:
                mine.discard(id(chase.frontier))
                chase.frontier, chase.next = chase.next, []
                mine.add(id(chase.next))
            del active
            if gave_up:
                break
        found = Chains([], [], [], gave_up)
        for chase in chases:
            if chase.root is not None:
                found.chains.append(chase.chain(chase.end))
                found.roots.append(chase.root)
                found.why.append(None)
            elif chase.dead is not None and not gave_up:
                found.chains.append(chase.chain(chase.dead))
                found.roots.append(NO_REFERRER)
                found.why.append(None)
            else:
                found.chains.append(None)
                found.roots.append(None)
                found.why.append(
                    None if gave_up
                    else "search too wide: shared objects with thousands of referrers"
                    if chase.full else f"no root within {max_depth} references"
                )
        return found

    def _level(self, active: list[_Chase]) -> bool:
        """Expand every active chase by one level; True when the deadline cut it."""
        waiting: dict[int, list[_Chase]] = {}
        nodes: list[object] = []
        own = (id(waiting), id(nodes), id(active))
        self.mine.update(own)
        for chase in active:
            for node in chase.frontier:
                if id(node) not in waiting:
                    waiting[id(node)] = []
                    nodes.append(node)
                waiting[id(node)].append(chase)
        try:
            for start in range(0, len(nodes), BATCH):
                if self.timer() >= self.deadline:
                    return True
                self._expand(nodes[start:start + BATCH], waiting)
            return False
        finally:
            self.mine.difference_update(own)

    def _expand(self, batch: list[object], waiting: dict[int, list[_Chase]]) -> None:
        mine, roots = self.mine, self.roots
        ids = {id(node) for node in batch}
        mine.update((id(batch), id(ids)))
        referred: set[int] = set()  # nodes something else refers to: no dead end
        for referrer in self.referrers(*batch):
            if id(referrer) in mine or is_args(referrer, batch):
                continue  # the search's own containers
            blind = issubclass(type(referrer), self.blind_types)
            for node in gc.get_referents(referrer):
                if id(node) in ids:
                    referred.add(id(node))
                    if not blind:
                        for chase in waiting[id(node)]:
                            chase.offer(referrer, node, roots)
        for node in batch:
            for holder in self.extra.get(id(node), ()):
                referred.add(id(node))
                for chase in waiting[id(node)]:
                    chase.offer(holder, node, roots)
        for node in batch:
            if id(node) not in referred:
                for chase in waiting[id(node)]:
                    if chase.dead is None:
                        chase.dead = node
        mine.difference_update((id(batch), id(ids)))
