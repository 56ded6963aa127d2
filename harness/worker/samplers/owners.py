"""Owner paths at the end of a run: who holds what grew, and tensors kept by small views.

Runs once, at ``stop()``: after the workload stopped, before it is closed, so
its cost enters no judged rate. It counts objects by type at start and at
stop, takes the TOP_TYPES types that grew most, and for SAMPLES new objects of
each (``gc.get_objects()`` after a full collection lists survivors roughly
oldest first; the samples are spread over as many of the newest as the type
grew by, so the few a request in flight holds are outvoted) searches back
through ``gc.get_referrers`` for the shortest chain from a root: a module's
globals, a class, or a local of a running function. Chains are named like the
cycle explainer's edges (:mod:`harness.worker.samplers.cycles`), from the root
down, ending with the held object's type. One line::

    {"type": "owners", "t": 21.9, "ops": 314993,
     "paths": [
       {"type": "list", "qualname": "list", "grew": 298, "count": 7960, "tracked": true,
        "path": "frame harness.worker.main.Worker.run (main.py:67).workload -> "
                "CacheWorkload.cache -> DictRetention.finished_tokens -> dict[31636] -> list",
        "root": "frame harness.worker.main.Worker.run at harness/worker/main.py:67",
        "depth": 4, "sampled": 8, "agree": 5,
        "others": [{"path": "...", "root": "...", "agree": 2}]},
       {"type": "dict", "qualname": "dict", "grew": 3000, "count": 9100, "tracked": false,
        "holder": "one", "held_here": 3000, "gained": 3000, "note": "dict objects are not
        tracked by the GC, ...", "path": "... -> Holder.records -> list[2999] -> dict", ...}],
     "tensors": {"count": 226, "view_bytes": 940672, "storage_bytes": 937784, "storages": 175,
                 "oversized": {"storages": 49, "view_bytes": 392, "storage_bytes": 859248,
                               "example": {...a view entry...}},
                 "views": [{"view_bytes": 128, "storage_bytes": 1048576, "ratio": 8192.0,
                            "shape": [16], "dtype": "torch.int64", "device": "cpu",
                            "tensors_on_storage": 2, "path": "...", "root": "..."}]},
     "untracked_counted": true, "gave_up": false, "seconds": 1.62, "search_seconds": 0.71}

- ``paths``: one entry per grown type, most grown first. ``path``, ``root`` and
  ``depth`` (references from the root) are null when no chain was found, and
  ``why`` then says why (``gave up after N s``, ``no root within 20
  references``, ...). Tracked types: ``sampled`` objects searched, ``agree`` of
  them on the reported path's shape (keys and indices blanked; a base tensor
  reached through its view, ``... -> Tensor._base -> Tensor``, counts as held
  where the view is), ``others``: other shapes two or more shared.
- Roots: ``module <name>`` (a module's globals; the path starts
  ``<module>.<global>``), ``class <module.Qual>``, ``frame <module.qualname> at
  <file>:<line>`` (a local of a running function; CPython 3.11 does not show
  running frames to the collector, so their locals are read and matched by
  identity; the path starts ``frame ... (<file>:<line>).<local>``), or ``no
  referrer the GC sees (...)`` (C code, or a running function's temporaries).
- Objects the collector does not track (a dict of scalars, a tuple of atoms, a
  numpy array) have no referrers to search. They are counted as what tracked
  objects refer to (per reference; the empty tuple and atoms left out), and a
  type whose new objects are mostly untracked says so (``tracked`` false,
  ``note``): its path leads to a tracked holder, never to a tracked look-alike.
  ``holder`` ``one``: an object that gained half the growth or more since the
  start (``gained``; ``held_here`` now); ``each``: the newest holders of one
  or a few each, voted like samples, with no path unless most agree (the
  candidates are then in ``others``); null: none seen. ``untracked_counted`` is
  false above UNTRACKED_LIMIT tracked objects, where counting them costs too much.
- ``tensors`` (null unless the workload imported torch; never imported here):
  every tensor the collector tracks, view bytes (``numel * element_size``),
  storage bytes once per storage; ``oversized``: storages at least
  PIN_RATIO times their largest owned view (a base tensor only its views keep
  does not count as owned), with the worst as ``example``; ``views``: the
  TOP_VIEWS such storages of TENSOR_MIN_STORAGE bytes or more, each with the
  owner path of its largest view. A base tensor is reached through its views
  (``Tensor._base``).
- ``error``: present when the sampler failed; whatever it found before stays.

Cost: a full collection, a count of every object and its references (at start
too), the sampling passes, then one ``gc.get_referrers`` heap scan per BATCH
objects per level for all searches together: 0.6 s in all (0.4 s of search)
on radix-steady's heap of 170k objects. The sampling and the searches stop at
``budget_s`` (3 s) after the count; a cut search sets ``gave_up``. Nothing it
found outlives the call: sample objects live in locals only and the record
holds strings and numbers. Reading a running frame's locals makes CPython keep
a snapshot of them until that function returns (the worker's own frames, which
return at exit), and naming a path builds the ``__dict__`` of the few
instances on it.
"""

from __future__ import annotations

import gc
import heapq
import operator
import re
import sys
import time
import types
import warnings
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse, repeat
from typing import Any, cast

from harness.worker.samplers.allocations import short
from harness.worker.samplers.base import BaseSampler, Clock, Sink, forced_collection
from harness.worker.samplers.cycles import class_dict, edge_name, label
from harness.worker.samplers.tensors import PIN_RATIO, view_bytes

BUDGET_S = 3.0  # for every search and the holder pass together, after the counting
MAX_DEPTH = 20  # references from the object back to a root
TOP_TYPES = 5  # grown types whose owners are searched
SAMPLES = 8  # new objects of a type searched; the most common path shape is reported
OTHER_PATHS = 2  # further path shapes reported per type, when two samples share one
MIN_GROWTH = 50  # a type that grew by fewer objects is not searched
# Types every program makes in passing: searched only when they grew by NOISE_MIN.
NOISE = frozenset({
    "function", "cell", "frame", "code", "method", "builtin_function_or_method",
    "method-wrapper", "weakref.ReferenceType", "weakref.ProxyType", "getset_descriptor",
    "member_descriptor", "wrapper_descriptor", "method_descriptor", "classmethod",
    "staticmethod", "property", "module", "type",
})
NOISE_MIN = 1000
BATCH = 128  # objects per gc.get_referrers scan (its cost grows with the batch: a linear check)
# Referrers followed per object and referrer type: a tree node's children all refer
# to it, and a shared object has thousands of referrers; one of a kind is enough to
# find the way up, a few keep the search from betting on one.
MAX_FANIN = 4
MAX_VISITED = 20_000  # objects one search may hold
CENSUS_CHUNK = 4096  # tracked objects whose referents are listed at once
UNTRACKED_LIMIT = 1_000_000  # tracked objects above which untracked ones are not counted
HOLDER_MIN = MIN_GROWTH // 2  # untracked objects one holder must refer to, to be a holder
HOLDERS_KEPT = 20  # biggest holders per untracked type remembered from the start
TENSOR_MIN_STORAGE = 1_000_000  # bytes; smaller pinned storages are only summed
TOP_VIEWS = 3
TENSOR_CHECKS = 256  # base tensors checked for a Python owner (one referrers scan)
ATOMS = (int, float, complex, str, bytes, bool, type(None))
EMPTY_TUPLE: tuple[()] = ()
NO_REFERRER = "no referrer the GC sees (C code, or a running function's temporaries)"

Referrers = Callable[..., list[Any]]
Timer = Callable[[], float]


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
        record: dict[str, Any] = {
            "paths": paths, "tensors": plan.tensors, "untracked_counted": plan.untracked_counted,
            "gave_up": plan.gave_up, "seconds": round(seconds, 3),
            "search_seconds": round(plan.search_seconds, 3),
        }
        if error is None and plan.error is not None:
            error = self._start_error or plan.error
        if error is not None:
            record["error"] = error
        del plan
        self.sink.sample("owners", self.now(), ops=self.ops, **record)


# -- counting ------------------------------------------------------------------------------


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
    """The counts at the start of the run, with the biggest holders of untracked objects."""
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
        _by_name(tracked), _by_name(untracked) if untracked is not None else None, holders,
    )


def count_types(objects: Sequence[object]) -> tuple[Counter[type], Counter[type] | None]:
    """Tracked objects by type, and the untracked non-atoms they refer to (per reference).

    The second pass costs about 2 us per tracked object (C-level iteration over
    every reference); above UNTRACKED_LIMIT objects it is skipped (None).
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


def _by_name(counts: Counter[type]) -> dict[str, int]:
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


# -- roots ---------------------------------------------------------------------------------


@dataclass
class Roots:
    """What a chain may start from: module globals, classes, locals of running frames."""

    modules: dict[int, str]  # id(module.__dict__) -> module name
    local_edges: dict[int, tuple[str, str]]  # id(local value) -> (edge name, root)
    frames: list[Any] = field(default_factory=list)  # keeps the frames (and ids) valid

    @classmethod
    def here(cls) -> Roots:
        modules: dict[int, str] = {}
        for name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None) if module is not None else None
            if isinstance(namespace, dict):
                modules.setdefault(id(namespace), name)
        roots = cls(modules, {})
        for frame in _running_frames():
            if frame.f_code.co_filename == __file__:
                continue  # this sampler's own locals hold the samples
            variables = frame.f_locals
            if variables is frame.f_globals:
                continue  # module-level code: its locals are the module's globals
            roots.frames.append(frame)
            where = f"{short(frame.f_code.co_filename)}:{frame.f_lineno}"
            owner = label(frame)
            root = f"frame {owner.split(' ')[1]} at {where}"
            for var, value in list(variables.items()):
                roots.local_edges.setdefault(id(value), (f"{owner}.{var}", root))
            del variables
        return roots

    def of(self, obj: object) -> str | None:
        """The root ``obj`` is, or None. A local of a running frame first: the object
        a function holds is the interesting end, not the module it came from."""
        local = self.local_edges.get(id(obj))
        if local is not None:
            return local[1]
        if id(obj) in self.modules:
            return f"module {self.modules[id(obj)]}"
        kind = type(obj)  # not isinstance: a proxy's __class__ is not asked
        if issubclass(kind, types.ModuleType):
            return f"module {getattr(obj, '__name__', '?')}"  # one not in sys.modules
        if issubclass(kind, type):
            return f"class {type_name(cast(type, obj))}"
        return None


def _running_frames() -> Iterator[types.FrameType]:
    seen: set[int] = set()
    for top in list(sys._current_frames().values()):
        frame: types.FrameType | None = top
        while frame is not None and id(frame) not in seen:
            seen.add(id(frame))
            yield frame
            frame = frame.f_back


# -- the search ----------------------------------------------------------------------------


@dataclass
class Found:
    """A chain, as strings only: what leaves the search."""

    path: str | None
    root: str | None
    depth: int | None = None
    why: str | None = None


class _Search:
    """One backward breadth-first search from one object to the nearest root."""

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


def search_chains(
    targets: list[object], roots: Roots, deadline: float, timer: Timer,
    referrers: Referrers, max_depth: int, ignore: set[int],
    extra: Mapping[int, list[object]] | None = None,
) -> tuple[list[list[object] | None], list[str | None], list[str | None], bool]:
    """For each target: its chain from a root (objects), the root, why none; gave up?

    Level by level, all searches together: the objects at one distance from
    their targets go to ``referrers`` in batches, so a level costs one heap scan
    per batch rather than one per object. ``extra``: referrers the collector
    cannot see, by id of what they hold (the views that keep a base tensor).
    ``ignore``: ids of the caller's own
    live containers (the list of targets); the search adds its own to a copy,
    dropped on return, since a freed container's id may come back as an
    instance ``__dict__`` that naming a path creates.
    """
    mine = set(ignore)
    searches = [_Search(target, mine) for target in targets]
    mine.update((id(mine), id(searches)))
    for search in searches:
        root = roots.of(search.target)
        if root is not None:
            search.end, search.root = search.target, root
    gave_up = False
    for _ in range(max_depth):
        active = [s for s in searches if s.root is None and s.frontier]
        if not active:
            break
        gave_up = _level(active, roots, deadline, timer, referrers, mine, extra or {})
        for search in active:
            mine.discard(id(search.frontier))
            search.frontier, search.next = search.next, []
            mine.add(id(search.next))
        del active
        if gave_up:
            break
    chains: list[list[object] | None] = []
    found_roots: list[str | None] = []
    why: list[str | None] = []
    for search in searches:
        if search.root is not None:
            chains.append(search.chain(search.end))
            found_roots.append(search.root)
            why.append(None)
        elif search.dead is not None and not gave_up:
            chains.append(search.chain(search.dead))
            found_roots.append(NO_REFERRER)
            why.append(None)
        else:
            chains.append(None)
            found_roots.append(None)
            why.append(
                None if gave_up
                else "search too wide: shared objects with thousands of referrers" if search.full
                else f"no root within {max_depth} references"
            )
    return chains, found_roots, why, gave_up


def _level(
    active: list[_Search], roots: Roots, deadline: float, timer: Timer,
    referrers: Referrers, mine: set[int], extra: Mapping[int, list[object]],
) -> bool:
    """Expand every active search by one level; True when the deadline cut it."""
    waiting: dict[int, list[_Search]] = {}
    nodes: list[object] = []
    own = (id(waiting), id(nodes), id(active))
    mine.update(own)
    for search in active:
        for node in search.frontier:
            if id(node) not in waiting:
                waiting[id(node)] = []
                nodes.append(node)
            waiting[id(node)].append(search)
    try:
        for start in range(0, len(nodes), BATCH):
            if timer() >= deadline:
                return True
            _expand(nodes[start:start + BATCH], waiting, roots, referrers, mine, extra)
        return False
    finally:
        mine.difference_update(own)


def _expand(
    batch: list[object], waiting: dict[int, list[_Search]], roots: Roots,
    referrers: Referrers, mine: set[int], extra: Mapping[int, list[object]],
) -> None:
    ids = {id(node) for node in batch}
    mine.update((id(batch), id(ids)))
    referred: set[int] = set()  # nodes something else refers to: no dead end
    for referrer in referrers(*batch):
        if id(referrer) in mine or _is_args(referrer, batch):
            continue  # the search's own containers
        harness = issubclass(type(referrer), BaseSampler)  # a sampler holds the gauges
        for node in gc.get_referents(referrer):
            if id(node) in ids:
                referred.add(id(node))
                if not harness:
                    for search in waiting[id(node)]:
                        search.offer(referrer, node, roots)
    for node in batch:
        for holder in extra.get(id(node), ()):
            referred.add(id(node))
            for search in waiting[id(node)]:
                search.offer(holder, node, roots)
    for node in batch:
        if id(node) not in referred:
            for search in waiting[id(node)]:
                if search.dead is None:
                    search.dead = node
    mine.difference_update((id(batch), id(ids)))


def _is_args(referrer: object, batch: Sequence[object]) -> bool:
    """The argument tuple of a wrapper around ``gc.get_referrers`` (the collector
    leaves out only its own)."""
    return (
        type(referrer) is tuple and len(referrer) == len(batch)
        and all(a is b for a, b in zip(referrer, batch, strict=True))
    )


# -- naming --------------------------------------------------------------------------------


def describe(nodes: Sequence[object], roots: Roots) -> str:
    """``first edge -> ... -> Type`` for a chain of objects from its root down."""
    edges: list[str] = []
    local = roots.local_edges.get(id(nodes[0]))
    index = 0
    if local is not None:
        edges.append(local[0])
    elif id(nodes[0]) in roots.modules and len(nodes) > 1:
        module = roots.modules[id(nodes[0])]
        edges.append(_global_edge(module, nodes[0], nodes[1]))
        index = 1
    while index < len(nodes) - 1:
        name, step = _edge(nodes, index)
        edges.append(name)
        index += step
    edges.append(type(nodes[-1]).__name__)
    return " -> ".join(edges)


def _global_edge(module: str, namespace: object, value: object) -> str:
    name = edge_name(namespace, value)  # "dict['NAME']"
    if name is not None and name.startswith("dict['") and name.endswith("']"):
        return f"{module}.{name[6:-2]}"
    return f"{module}{name[4:]}" if name is not None else f"{module}.<ref>"


def _edge(nodes: Sequence[object], index: int) -> tuple[str, int]:
    """The edge leaving ``nodes[index]`` and how many objects it spans.

    An owner that names the object after next directly skips the one between
    (an instance's or a class's ``__dict__``, a function's closure tuple); a
    cell is passed through to its content, since the edge into it named the
    variable.
    """
    owner, to = nodes[index], index + 1
    name = None
    if index + 2 < len(nodes) and (
        isinstance(owner, types.FunctionType) or _is_namespace(owner, nodes[index + 1])
    ):
        ahead = edge_name(owner, nodes[index + 2])
        if ahead is not None and not ahead.endswith(".<ref>"):
            name, to = ahead, index + 2
    if name is None:
        name = edge_name(owner, nodes[to]) or (
            f"{label(owner)}._base" if _base_of(owner) is nodes[to]
            else f"{label(owner)}.<ref>"
        )
    if isinstance(nodes[to], types.CellType) and to + 1 < len(nodes):
        to += 1
    return name, to - index


def _base_of(obj: object) -> object:
    """A tensor view's ``_base`` (held through C++, so no referent the GC lists)."""
    if not callable(getattr(type(obj), "untyped_storage", None)):
        return None
    try:
        return getattr(obj, "_base", None)
    except Exception:
        return None


def _is_namespace(owner: object, between: object) -> bool:
    if isinstance(owner, type):
        return class_dict(owner) is between
    try:
        return object.__getattribute__(owner, "__dict__") is between
    except (AttributeError, TypeError):
        return False


def shape(path: str) -> str:
    """A path with keys and indices blanked, to count paths that say the same; a base
    tensor reached through its view counts as held where the view is."""
    return re.sub(r" -> \w+\._base -> (\w+)$", r" -> \1", re.sub(r"\[[^\]]*\]", "[]", path))


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
    holder: str | None = None
    held_here: int = 0
    gained: int = 0
    instance_edges: dict[int, str] = field(default_factory=dict)


class Plan:
    """The grown types and their sample objects, searched together; strings out."""

    def __init__(self, baseline: Census | None, max_depth: int) -> None:
        self.baseline = baseline
        self.max_depth = max_depth
        self.entries: list[Entry] = []
        self.tensors: dict[str, Any] | None = None
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
        roots = Roots.here()
        mine.update((id(roots.frames), id(roots.modules), id(roots.local_edges)))
        tensors = tensor_report(everything, referrers, roots.local_edges, mine)
        mine.discard(id(everything))
        del everything, wanted, loose
        self.tensors, views, extra = tensors.summary, tensors.views, tensors.base_views
        if tensors.example is not None:
            views.append(tensors.example)
        del tensors
        mine.update(id(holders) for holders in extra.values())
        for view in views:
            view["target"] = len(targets)
            targets.append(view.pop("tensor"))
        # All together, level by level: types share most of the way up (a tensor's
        # node, the node's tree), and each level is one heap scan per batch for all.
        chains, found_roots, why, gave_up = search_chains(
            targets, roots, deadline, timer, referrers, self.max_depth, mine, extra,
        )
        for index, (chain, root, reason) in enumerate(zip(chains, found_roots, why, strict=True)):
            if chain is None:
                self._found[index] = Found(None, None, None, reason)
            else:
                path = describe(chain, roots)
                self._found[index] = Found(path, root, path.count(" -> "))
        chains.clear()
        del chains
        del targets, roots
        extra.clear()
        if self.tensors is not None:
            entries = [self._view_entry(v) for v in views]
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
            _by_name(tracked_types),
            _by_name(untracked_types) if both and untracked_types is not None else None,
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

    def paths(self, gave_up: str | None) -> list[dict[str, Any]]:
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

    def _entry(self, entry: Entry) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": entry.short, "qualname": entry.name, "grew": entry.grew,
            "count": entry.count, "tracked": entry.tracked,
        }
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
                _through(self._found[i], entry.instance_edges.get(i), entry.short)
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
                    others.insert(0, {"path": best.path, "root": best.root, "agree": agree})
                    best = Found(None, None, None, (
                        f"the newest holders disagree: {agree} of {len(found)} paths alike"
                    ))
                if others:
                    record["others"] = others
        record["path"] = best.path if best is not None else None
        record["root"] = best.root if best is not None else None
        record["depth"] = best.depth if best is not None else None
        if record["path"] is None:
            why = best.why if best is not None else None
            if why is None and not self.gave_up:
                why = "no sample found" if entry.tracked else "no tracked object holds them"
            if why is not None:
                record["why"] = why
        return record

    def _view_entry(self, view: dict[str, Any]) -> dict[str, Any]:
        found = self._found.get(view.pop("target"))
        view["path"] = found.path if found is not None else None
        view["root"] = found.root if found is not None else None
        if found is not None and found.path is None and found.why is not None:
            view["why"] = found.why
        return view


def _through(found: Found, edge: str | None, short: str) -> Found:
    """A holder's path continued to one untracked object it holds."""
    if found.path is None or edge is None:
        return found
    head = found.path.rsplit(" -> ", 1)[0] + " -> " if " -> " in found.path else ""
    return Found(f"{head}{edge} -> {short}", found.root, (found.depth or 0) + 1)


def _most_common(found: Sequence[Found]) -> tuple[Found | None, int, list[dict[str, Any]]]:
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
    others = [
        {"path": first[s].path, "root": first[s].root, "agree": n}
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


# -- tensors -------------------------------------------------------------------------------


@dataclass
class Tensors:
    """The tensor report, and what the owner search needs from the tensor pass."""

    summary: dict[str, Any] | None = None
    views: list[dict[str, Any]] = field(default_factory=list)  # each with its "tensor"
    example: dict[str, Any] | None = None  # the largest pinned storage, for "oversized"
    # id(base) -> the live views whose ``_base`` it is: a base tensor whose Python
    # object only its views keep (through C++) is reached through them
    base_views: dict[int, list[object]] = field(default_factory=dict)


def tensor_report(
    objects: list[object], referrers: Referrers = gc.get_referrers,
    held: Container[int] = (), ignore: Iterable[int] = (),
) -> Tensors:
    """Count, view bytes and unique storage bytes of the tensors alive in the GC, and
    the storages kept alive only by views far smaller than they are.

    A view keeps its base tensor alive through C++, and PyTorch keeps that base's
    Python object too; a base that no Python object refers to is held only by its
    views, so the views are what holds the storage. Which bases have Python
    owners takes one ``referrers`` scan over at most TENSOR_CHECKS of them (the
    largest storages); an unchecked base counts as owned, and so does one whose
    id is in ``held`` (a local of a running function, which no scan sees);
    ``ignore``: ids of the caller's containers (its samples), owners of nothing.
    Never imports torch: empty when the workload did not.
    """
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    report = Tensors()
    if not isinstance(tensor_type, type):
        return report
    is_tensor: dict[type, bool] = {}
    count = viewed = unreadable = 0
    # (device, data pointer) -> [nbytes, [tensor, ...]]
    storages: dict[tuple[str, int], list[Any]] = {}
    own = {id(objects), id(storages), *ignore}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for obj in objects:
            kind = type(obj)
            if kind not in is_tensor:
                is_tensor[kind] = issubclass(kind, tensor_type)
            if not is_tensor[kind]:
                continue
            count += 1
            try:
                viewed += view_bytes(obj)
                if obj.is_meta:  # type: ignore[attr-defined]
                    continue
                storage = obj.untyped_storage()  # type: ignore[attr-defined]
                key = (str(obj.device), int(storage.data_ptr()))  # type: ignore[attr-defined]
                nbytes = int(storage.nbytes())
            except Exception:  # sparse, or a subclass without storage
                unreadable += 1
                continue
            if nbytes == 0:
                continue
            entry = storages.get(key)
            if entry is None:
                storages[key] = entry = [nbytes, []]
                own.add(id(entry[1]))
            entry[1].append(obj)
        pinned = _pinned(storages, own, referrers, report.base_views, held)
        report.summary = {
            "count": count,
            "view_bytes": viewed,
            "storage_bytes": sum(e[0] for e in storages.values()),
            "storages": len(storages),
            "oversized": {
                "storages": len(pinned),
                "view_bytes": sum(view for _, view, _, _ in pinned),
                "storage_bytes": sum(nbytes for nbytes, _, _, _ in pinned),
            },
            "views": [],
        }
        if unreadable:
            report.summary["unreadable"] = unreadable
        pinned.sort(key=lambda p: p[1] - p[0])  # the most bytes kept beyond the view first
        large = [p for p in pinned if p[0] >= TENSOR_MIN_STORAGE]
        report.views = [_view(*p) for p in large[:TOP_VIEWS]]
        if pinned:  # the worst of them, however small: many small ones add up too
            report.example = _view(*pinned[0])
        pinned.clear()
    storages.clear()
    return report


def _pinned(
    storages: dict[tuple[str, int], list[Any]], own: set[int], referrers: Referrers,
    base_views: dict[int, list[object]], held: Container[int],
) -> list[tuple[int, int, int, object]]:
    """``(storage bytes, largest view, tensors on it, that view)`` for each storage whose
    owned tensors are all PIN_RATIO times smaller than it."""
    bases: dict[int, object] = {}
    for _, tensors in storages.values():
        on = {id(t) for t in tensors}
        for tensor in tensors:
            base = _base_of(tensor)
            if base is not None and id(base) in on:
                bases[id(base)] = base
                base_views.setdefault(id(base), []).append(tensor)
    own.update((id(bases), id(base_views)))
    own.update(id(views) for views in base_views.values())
    unheld = {i: b for i, b in bases.items() if i not in held}
    own.add(id(unheld))
    owned = _owned_bases(storages, unheld, own, referrers)
    owned.update(i for i in bases if i in held)
    unheld.clear()
    pinned: list[tuple[int, int, int, object]] = []
    for nbytes, tensors in storages.values():
        held = [t for t in tensors if id(t) not in bases or id(t) in owned]
        if not held:
            continue
        largest = max(held, key=view_bytes)
        view = view_bytes(largest)
        if view * PIN_RATIO <= nbytes:
            pinned.append((nbytes, view, len(tensors), largest))
    bases.clear()
    return pinned


def _owned_bases(
    storages: dict[tuple[str, int], list[Any]], bases: dict[int, object], own: set[int],
    referrers: Referrers,
) -> set[int]:
    """Ids of the base tensors some Python object refers to (or that were not checked)."""
    if not bases:
        return set()
    by_size = sorted(
        ((nbytes, id(t)) for nbytes, tensors in storages.values() for t in tensors
         if id(t) in bases),
        reverse=True,
    )
    checked = [bases[i] for _, i in by_size[:TENSOR_CHECKS]]
    owned = {i for _, i in by_size[TENSOR_CHECKS:]}
    ids = {id(t) for t in checked}
    own.update((id(checked), id(ids), id(owned)))
    for referrer in referrers(*checked):
        if id(referrer) in own or _is_args(referrer, checked):
            continue
        owned.update(id(r) for r in gc.get_referents(referrer) if id(r) in ids)
    checked.clear()
    return owned


def _view(nbytes: int, view: int, shared: int, tensor: Any) -> dict[str, Any]:
    return {
        "view_bytes": view,
        "storage_bytes": nbytes,
        "ratio": round(nbytes / view, 1) if view else None,
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype),
        "device": str(tensor.device),
        "tensors_on_storage": shared,
        "tensor": tensor,
    }
