"""Owner paths at the end of a run: who holds what grew, and tensors kept by small views.

Runs once, at ``stop()``: after the workload stopped, before it is closed, so
its cost enters no judged rate. It counts objects by type at start and at
stop (:mod:`harness.worker.heapgraph.census`), samples new objects of the
types that grew most (spread over as many of the newest as the type grew by,
so the few a request in flight holds are outvoted), searches back from them
to a root (:mod:`harness.worker.heapgraph.search`) and reports, per type, the
path shape most samples agree on. A type whose new objects the collector
does not track is reported through the tracked objects that hold them. The
tensor report (:mod:`harness.worker.heapgraph.tensor_views`) names who holds
the views that pin large storages. The record's fields are ``OwnersLine`` in
:mod:`harness.runfiles.records`.

The sampling and the searches stop at ``budget_s`` after the count; a cut
search sets ``gave_up``. Nothing it found outlives the call: sample objects
live in locals only and the record holds strings and numbers.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from harness.runfiles.records import OtherPath, OwnerPath, OwnersLine, TensorView, TensorViews
from harness.worker.heapgraph.census import (
    EMPTY_TUPLE,
    HOLDER_MIN,
    Census,
    big_holders,
    by_name,
    count_types,
    grown_types,
    take_census,
    type_name,
)
from harness.worker.heapgraph.naming import edge_name
from harness.worker.heapgraph.paths import describe, holding_container, shape, through
from harness.worker.heapgraph.roots import Roots
from harness.worker.heapgraph.search import Found, Referrers, Search, Timer
from harness.worker.heapgraph.tensor_views import tensor_report
from harness.worker.samplers.base import BaseSampler, Clock, Sink, forced_collection

BUDGET_S = 3.0  # for every search and the holder pass together, after the counting
MAX_DEPTH = 20  # references from the object back to a root
SAMPLES = 8  # new objects of a type searched; the most common path shape is reported
OTHER_PATHS = 2  # further path shapes reported per type, when two samples share one


class OwnersSampler(BaseSampler):
    """Once, at stop: owner paths of the most-grown types, and the tensor view report."""

    name = "owners"

    def __init__(
        self,
        budget_s: float = BUDGET_S,
        max_depth: int = MAX_DEPTH,
        referrers: Referrers = gc.get_referrers,
        timer: Timer = time.perf_counter,
    ) -> None:
        super().__init__()
        self.budget_s = budget_s
        self.max_depth = max_depth
        self._referrers = referrers
        self._timer = timer
        self._baseline: Census | None = None
        self._start_error: str | None = None

    def start(self, writer: Sink, clock: Clock) -> None:
        super().start(writer, clock)
        try:
            self._baseline = take_census()
        except Exception as exc:  # then stop() says why it has no growth to explain
            self._baseline = None
            self._start_error = f"counting at start failed: {type(exc).__name__}: {exc}"

    def stop(self) -> None:
        if not self.started:
            return
        began = self._timer()
        plan = Plan(self._baseline, self.max_depth)
        error = None
        try:
            with forced_collection():
                gc.collect()  # no garbage among the samples; survivors listed oldest first
            plan.fill(self._timer, self.budget_s, self._referrers)
        except Exception as exc:  # the run's verdict must never depend on this sampler
            error = f"{type(exc).__name__}: {exc}"
        seconds = self._timer() - began
        paths = plan.paths(f"gave up after {seconds:.1f} s" if plan.gave_up else None)
        line: OwnersLine = {
            "type": "owners", "t": self.now(), "ops": self.ops,
            "paths": paths, "tensors": plan.tensors, "untracked_counted": plan.untracked_counted,
            "gave_up": plan.gave_up, "seconds": round(seconds, 3),
            "search_seconds": round(plan.search_seconds, 3),
        }
        if error is None and plan.error is not None:
            error = self._start_error or plan.error
        if error is not None:
            line["error"] = error
        del plan
        self.sink.line(line)


# -- the plan: what to search, and the record ----------------------------------------------


@dataclass
class Entry:
    name: str
    short: str
    grew: int
    count: int
    tracked: bool
    targets: list[int] = field(default_factory=list)  # indices into the plan's targets
    # untracked types: "one" (a holder that gained most of them) or "each" (the newest
    # holders of one or a few each); the edge from each holder to one of them
    holder: Literal["one", "each"] | None = None
    held_here: int = 0
    gained: int = 0
    instance_edges: dict[int, str] = field(default_factory=dict)


class Plan:
    """The grown types and their sample objects, searched together; strings out."""

    def __init__(self, baseline: Census | None, max_depth: int) -> None:
        self.baseline = baseline
        self.max_depth = max_depth
        self.entries: list[Entry] = []
        self.tensors: TensorViews | None = None
        self.untracked_counted = False
        self.gave_up = False
        self.search_seconds = 0.0
        self.error: str | None = None
        self._found: dict[int, Found] = {}  # target index -> what its search found

    def fill(self, timer: Timer, budget_s: float, referrers: Referrers) -> None:
        """Count, sample, search. Sample objects live in this call's locals only."""
        if self.baseline is None:
            self.error = "no count from the start of the run to compare with"
            return
        mine: set[int] = set()
        targets: list[object] = []
        mine.update((id(mine), id(targets)))
        everything = gc.get_objects()
        mine.add(id(everything))
        by_type = self._count(everything)
        # The search's time starts here: counting is needed whatever the budget.
        began = timer()
        deadline = began + budget_s
        wanted = {by_type[e.name]: e for e in self.entries if e.tracked}
        loose = {by_type[e.name]: e for e in self.entries if not e.tracked}
        by_type.clear()
        _sample_newest(everything, wanted, targets, mine)
        cut = _find_holders(everything, loose, self.baseline, targets, mine, timer, deadline)
        # Roots after sampling: reading frames' locals makes new dicts, not samples.
        roots = Roots.here(skip_files=(__file__,))  # this module's frames hold the samples
        mine.update(roots.ids())
        tensors = tensor_report(everything, referrers, roots.local_edges, mine)
        mine.discard(id(everything))
        del everything, wanted, loose
        self.tensors, views, extra = tensors.summary, tensors.views, tensors.base_views
        if tensors.example is not None:
            views.append(tensors.example)
        first_view = len(targets)
        targets.extend(tensors.tensors)
        tensors.tensors.clear()  # the search must not take this list for their owner
        del tensors
        mine.update(id(holders) for holders in extra.values())
        # All together, level by level: types share most of the way up (a tensor's
        # node, the node's tree), and each level is one heap scan per batch for all.
        search = Search(roots, deadline, timer, referrers, mine, extra, (BaseSampler,))
        found = search.chains(targets, self.max_depth)
        del search
        chains = found.chains
        for index, (chain, root, reason) in enumerate(
            zip(chains, found.roots, found.why, strict=True)
        ):
            if chain is None:
                self._found[index] = Found(None, None, None, reason)
            else:
                path = describe(chain, roots)
                self._found[index] = Found(path, root, path.count(" -> "),
                                           holds=holding_container(chain))
        chains.clear()
        gave_up = found.gave_up
        del chains, found
        del targets, roots
        extra.clear()
        if self.tensors is not None:
            entries = [self._view_entry(v, first_view + i) for i, v in enumerate(views)]
            if self.tensors["oversized"]["storages"]:
                self.tensors["oversized"]["example"] = entries.pop()
            self.tensors["views"] = entries
        self.gave_up = gave_up or cut
        self.search_seconds = timer() - began

    def _count(self, everything: list[object]) -> dict[str, type]:
        """The grown types as entries; returns their type objects by name."""
        assert self.baseline is not None
        tracked_types, untracked_types = count_types(everything)
        both = untracked_types is not None and self.baseline.untracked is not None
        self.untracked_counted = both
        after = Census(
            by_name(tracked_types),
            by_name(untracked_types) if both and untracked_types is not None else None,
        )
        before = self.baseline if both else Census(self.baseline.tracked, None)
        by_type = {type_name(kind): kind for kind in (*tracked_types, *(untracked_types or ()))}
        for name, grew in grown_types(before, after):
            new_tracked = after.tracked.get(name, 0) - before.tracked.get(name, 0)
            new_untracked = (after.untracked or {}).get(name, 0) - (before.untracked or {}).get(
                name, 0)
            self.entries.append(Entry(
                name, by_type[name].__name__, grew, after.total(name), new_tracked >= new_untracked,
            ))
        return {e.name: by_type[e.name] for e in self.entries}

    def paths(self, gave_up: str | None) -> list[OwnerPath]:
        """The record's entries; ``gave_up`` is the reason for those the deadline cut."""
        entries = [self._entry(e) for e in self.entries]
        for entry in entries:
            if entry["path"] is None and "why" not in entry and gave_up is not None:
                entry["why"] = gave_up
        if self.tensors is not None and gave_up is not None:
            example = self.tensors["oversized"].get("example")
            for view in [*self.tensors["views"], *([example] if example else [])]:
                if view["path"] is None and "why" not in view:
                    view["why"] = gave_up
        return entries

    def _entry(self, entry: Entry) -> OwnerPath:
        head: _Head = {
            "type": entry.short, "qualname": entry.name, "grew": entry.grew,
            "count": entry.count, "tracked": entry.tracked,
        }
        record: _Votes = {}
        found = [self._found[i] for i in entry.targets if i in self._found]
        if entry.tracked:
            record["sampled"] = len(entry.targets)
            best, agree, others = _most_common(found)
            record["agree"] = agree
            if others:
                record["others"] = others
        else:
            record["note"] = (
                f"{entry.short} objects are not tracked by the GC, so no search can start from "
                "them: " + (
                    f"the path leads to the tracked object that gained {entry.gained} of them "
                    f"(it holds {entry.held_here})" if entry.holder == "one" else
                    "the path leads to the newest tracked objects that hold one or a few each"
                    if entry.holder == "each" else "no tracked object was seen holding them"
                )
            )
            record["holder"] = entry.holder
            found = [
                through(self._found[i], entry.instance_edges.get(i), entry.short)
                for i in entry.targets if i in self._found
            ]
            if entry.holder == "one":
                record["held_here"], record["gained"] = entry.held_here, entry.gained
                best = found[0] if found else None
            else:
                record["sampled"] = len(entry.targets)
                best, agree, others = _most_common(found)
                record["agree"] = agree
                if best is not None and best.path is not None and agree * 2 <= len(found):
                    # no majority: no path, but what the holders said, for people to weigh
                    others.insert(0, {"path": best.path, "root": best.root, "agree": agree,
                                      "holds": best.holds or 0})
                    best = Found(None, None, None, (
                        f"the newest holders disagree: {agree} of {len(found)} paths alike"
                    ))
                if others:
                    record["others"] = others
        tail: _Why = {}
        if best is None or best.path is None:
            why = best.why if best is not None else None
            if why is None and not self.gave_up:
                why = "no sample found" if entry.tracked else "no tracked object holds them"
            if why is not None:
                tail["why"] = why
        held: _Holds = {} if best is None or best.holds is None else {"holds": best.holds}
        return {
            **head, **record,
            "path": best.path if best is not None else None,
            "root": best.root if best is not None else None,
            "depth": best.depth if best is not None else None,
            **tail, **held,
        }

    def _view_entry(self, view: TensorView, target: int) -> TensorView:
        found = self._found.get(target)
        view["path"] = found.path if found is not None else None
        view["root"] = found.root if found is not None else None
        if found is not None and found.path is None and found.why is not None:
            view["why"] = found.why
        return view


class _Head(TypedDict):
    """The fields every owner path entry starts with."""

    type: str
    qualname: str
    grew: int
    count: int
    tracked: bool


class _Votes(TypedDict):
    """The fields between the head and the path: how the path was chosen."""

    note: NotRequired[str]
    holder: NotRequired[Literal["one", "each"] | None]
    held_here: NotRequired[int]
    gained: NotRequired[int]
    sampled: NotRequired[int]
    agree: NotRequired[int]
    others: NotRequired[list[OtherPath]]


class _Holds(TypedDict):
    holds: NotRequired[int]  # entries of the container holding the object


class _Why(TypedDict):
    why: NotRequired[str]  # why an entry has no path


def _most_common(found: Sequence[Found]) -> tuple[Found | None, int, list[OtherPath]]:
    """The newest found path of the most common shape, how many samples agree, and
    the other shapes two or more samples share (a type grows in two places)."""
    with_path = [f for f in found if f.path is not None]
    if not with_path:
        return (found[0] if found else None), 0, []
    shapes = Counter(shape(f.path or "") for f in with_path)
    ranked = shapes.most_common()
    first: dict[str, Found] = {}
    for f in with_path:
        first.setdefault(shape(f.path or ""), f)
    winner, agree = ranked[0]
    others: list[OtherPath] = [
        {"path": first[s].path, "root": first[s].root, "agree": n, "holds": first[s].holds or 0}
        for s, n in ranked[1:1 + OTHER_PATHS] if n >= 2
    ]
    return first[winner], agree, others


def _sample_newest(
    everything: list[object], wanted: dict[type, Entry], targets: list[object], mine: set[int],
) -> None:
    """SAMPLES objects of each wanted type, as search targets: the newest, then spread
    evenly over as many of the newest as the type grew by. A leak's objects are most
    of those; the few still in flight (a request being served) are outvoted."""
    if not wanted:
        return
    picks = {kind: _spread(entry.grew, SAMPLES) for kind, entry in wanted.items()}
    seen = dict.fromkeys(wanted, 0)
    left = sum(len(p) for p in picks.values())
    for obj in reversed(everything):
        kind = type(obj)
        if kind not in seen or id(obj) in mine:
            continue
        if seen[kind] in picks[kind]:
            wanted[kind].targets.append(len(targets))
            targets.append(obj)
            left -= 1
            if left == 0:
                break
        seen[kind] += 1


def _spread(span: int, count: int) -> set[int]:
    """``count`` positions spread over ``range(span)``, 0 (the newest) first."""
    span = max(span, 1)
    return {position * span // count for position in range(count)} if span > count else set(
        range(min(span, count)))


def _find_holders(
    everything: list[object], loose: dict[type, Entry], baseline: Census,
    targets: list[object], mine: set[int], timer: Timer, deadline: float,
) -> bool:
    """Search targets for the untracked grown types: tracked objects that hold them.

    A holder that gained half the growth or more since the start (an
    accumulating list, a dict by request id) is the one target ("one"); when
    none did, the SAMPLES newest tracked objects holding one are ("each": a
    small dict per node). True when cut by the deadline.
    """
    if not loose:
        return False
    big = big_holders(everything, loose, timer, deadline)
    cut = timer() >= deadline
    spread: list[type] = []
    for kind, entry in loose.items():
        before = baseline.holders.get(entry.name, {})
        best = max(
            ((n - before.get(id(everything[i]), 0), n, i) for n, i in big.get(kind, [])),
            default=None,
        )
        if best is not None and best[0] >= max(HOLDER_MIN, entry.grew // 2):
            gained, held, index = best
            entry.holder, entry.held_here, entry.gained = "one", held, gained
            _add_holder(entry, everything[index], kind, targets)
        else:
            spread.append(kind)
    big.clear()
    if not spread or cut:
        return cut
    left = {kind: SAMPLES for kind in spread}
    is_tracked = gc.is_tracked
    for index, obj in enumerate(reversed(everything)):
        if index % 4096 == 0 and timer() >= deadline:
            return True
        if id(obj) in mine:
            continue
        for ref in gc.get_referents(obj):
            kind = type(ref)
            if left.get(kind, 0) > 0 and not is_tracked(ref) and ref is not EMPTY_TUPLE:
                loose[kind].holder = "each"
                _add_holder(loose[kind], obj, kind, targets)
                left[kind] -= 1
                break
        if not any(left.values()):
            break
    return False


def _add_holder(entry: Entry, holder: object, kind: type, targets: list[object]) -> None:
    instance = _newest_untracked(holder, kind)
    edge = edge_name(holder, instance) if instance is not None else None
    if edge is not None:
        entry.instance_edges[len(targets)] = edge
    entry.targets.append(len(targets))
    targets.append(holder)


def _newest_untracked(holder: object, kind: type) -> object:
    """One untracked ``kind`` the holder refers to: the last in a list or dict (the
    newest, when appended), else the first the collector lists."""
    if isinstance(holder, list | tuple | dict):
        values = list(holder.values() if isinstance(holder, dict) else holder)
        for value in reversed(values):
            if type(value) is kind and not gc.is_tracked(value):
                return value
    for ref in gc.get_referents(holder):
        if type(ref) is kind and not gc.is_tracked(ref):
            return ref
    return None
