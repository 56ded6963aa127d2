"""Where the slots a pool's idle books miss were allocated: the cause of a book leak.

A pool slot that one exit path forgets to give back (a Mamba state slot of an
aborted queued request, the in-flight KV slot of a retracted request) shows only
as books that come up short at idle (``idle_pool_mismatch``); the count says
nothing of which call took the slots. The ledger wraps, on the instance, the
``alloc`` and ``free`` of each allocator the cache names in its optional
``pool_allocators()`` and remembers, per live slot id, the allocating call site
(the frames into the code under test, interned: one tuple per distinct stack,
shared by every slot of a call), the request the call served (a ``req`` or
``run`` local of the first frame that has one) and when. ``free`` forgets the
ids. Nothing else is kept per slot, and nothing is walked until the books are
short.

At an idle moment whose books are short on a pool, the lost slots are the ledger's
live ids less those the cache's own structure holds (its optional
``held_slots()``: the ids its tree holds, which ``evictable + protected``
count) and less those waiting requests own (``kv_indices``, ``state_slot``). Each
lost slot's exit path is the first thing that happened to its request after the
allocation: the path it left by (``abort-waiting``, ``retract``, ``finish``...)
or ``failed-schedule`` (its admission failed and it went back to the queue).
They are grouped by site and path, the largest group first. A lost slot is
remembered with its path once found, so a path told long ago stays known.

The protocol (``docs/own-cache.md``, "Slot provenance"): ``pool_allocators() ->
{pool: allocator}`` with the pool names of ``pool_accounting()``, each allocator
with ``alloc(...)`` returning the ids (an int tensor, a list, an int, or None)
and ``free(ids)``; and ``held_slots() -> {pool: ids}``. A pool without both gets
no provenance, and its books still judge it.
"""

from __future__ import annotations

import sys
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import count, repeat
from types import CodeType, FrameType
from typing import Any

from harness.worker.frames import short

STACK_DEPTH = 4  # frames kept per site, innermost first, up to the scenario driver
RID_DEPTH = 8  # frames searched for the request an allocation serves
EVENTS_KEPT = 8192  # requests whose lifecycle events are remembered (a ring)
GROUPS_SHOWN = 3
REQUESTS_SHOWN = 5
DRIVER = ("/scenarios/workloads/",)  # the harness's scheduler: where the stack stops
REQUEST_LOCALS = ("req", "run", "waiting")  # locals that hold the request being served

Entry = tuple[int, Any, int]  # (site index, request id or None, allocation sequence number)


class PoolLedger:
    """Live slot ids of one allocator, each with the site and request that took it."""

    def __init__(self, name: str, allocator: Any, owner: SlotLedger) -> None:
        self.name = name
        self.live: dict[int, Entry] = {}
        self._owner = owner
        self.active = _wrap(allocator, "alloc", self._alloc) and _wrap(
            allocator, "free", self._free)

    def _alloc(self, result: Any) -> None:
        ids = _ids(result)
        if ids:
            self.live.update(dict.fromkeys(ids, self._owner.entry(sys._getframe(2))))

    def _free(self, ids: Any) -> None:
        deque(map(self.live.pop, _ids(ids), repeat(None)), maxlen=0)


class SlotLedger:
    def __init__(self, cache: Any) -> None:
        allocators = _call(cache, "pool_allocators") or {}
        self._held: Callable[[], Mapping[str, Any]] | None = (
            getattr(cache, "held_slots", None) if callable(getattr(cache, "held_slots", None))
            else None)
        self.pools = {name: PoolLedger(str(name), allocator, self)
                      for name, allocator in dict(allocators).items()}
        self.pools = {name: pool for name, pool in self.pools.items() if pool.active}
        self.active = bool(self.pools) and self._held is not None
        self._sites: dict[tuple[tuple[str, int, str], ...], int] = {}
        self._stacks: list[tuple[str, ...]] = []
        self._seq = count()
        self._events: OrderedDict[Any, list[tuple[int, str]]] = OrderedDict()
        self._told: dict[tuple[str, int, int], str] = {}  # (pool, id, seq) -> path, once found
        self._request_local: dict[CodeType, str | None] = {}
        self.lost: list[dict[str, Any]] = []  # the latest short idle moment's findings

    # ------------------------------------------------------------------ recording
    def entry(self, frame: FrameType | None) -> Entry:
        """The site and request of an allocation whose caller is ``frame``."""
        key: list[tuple[str, int, str]] = []
        rid = None
        depth = 0
        while frame is not None and depth < RID_DEPTH:
            code = frame.f_code
            in_driver = any(part in code.co_filename for part in DRIVER)
            if len(key) < STACK_DEPTH and not in_driver:
                key.append((code.co_filename, frame.f_lineno, code.co_name))
            if rid is None:
                rid = self._request_of(frame)
            if in_driver and (rid is not None or key):
                break
            frame = frame.f_back
            depth += 1
        stack = tuple(key)
        site = self._sites.get(stack)
        if site is None:
            site = self._sites[stack] = len(self._stacks)
            self._stacks.append(tuple(f"{short(f)}:{line} in {name}" for f, line, name in stack))
        return site, rid, next(self._seq)

    def _request_of(self, frame: FrameType) -> Any:
        code = frame.f_code
        name = self._request_local.get(code, "")
        if name == "":  # first time this code object is seen: which local names the request
            name = self._request_local[code] = next(
                (n for n in REQUEST_LOCALS if n in code.co_varnames), None)
        if name is None:
            return None
        value = frame.f_locals.get(name)
        value = getattr(value, "req", value)  # a Running or Waiting entry holds the Req
        return getattr(value, "rid", None)

    def event(self, rid: Any, what: str) -> None:
        """Something happened to request ``rid``: it left by a path, or its admission failed."""
        events = self._events.get(rid)
        if events is None:
            events = self._events[rid] = []
            if len(self._events) > EVENTS_KEPT:
                self._events.popitem(last=False)
        events.append((next(self._seq), what))

    # ------------------------------------------------------------------ at idle
    def read(self, short: Mapping[str, int], waiting: Iterable[Any]) -> None:
        """The lost slots of every pool whose books are ``short`` (slots missing, by
        pool), by site and exit path; call with no request running."""
        short_pools = {name: n for name, n in short.items() if name in self.pools and n > 0}
        if not short_pools:
            self.lost = []
            return
        held = dict(self._held() if self._held is not None else {})
        owned = _waiting_owned(waiting)
        lost = []
        for name, short_by in short_pools.items():
            if name not in held:
                continue
            keep = set(_ids(held[name])) | owned.get(name, set())
            gone = [(i, e) for i, e in self.pools[name].live.items() if i not in keep]
            lost.append(self._grouped(name, short_by, gone))
        self.lost = lost

    def _grouped(self, pool: str, short_by: int, gone: Sequence[tuple[int, Entry]]
                 ) -> dict[str, Any]:
        groups: Counter[tuple[int, str]] = Counter()
        requests: dict[tuple[int, str], list[Any]] = {}
        for slot, (site, rid, seq) in gone:
            path = self._path(pool, slot, rid, seq)
            groups[site, path] += 1
            shown = requests.setdefault((site, path), [])
            if rid is not None and len(shown) < REQUESTS_SHOWN and rid not in shown:
                shown.append(rid)
        return {"pool": pool, "short": short_by, "found": len(gone), "groups": [
            {"site": self._stacks[site][0] if self._stacks[site] else "unknown",
             "stack": list(self._stacks[site]), "exit": path, "slots": n,
             "requests": [str(r) for r in requests[site, path]]}
            for (site, path), n in groups.most_common(GROUPS_SHOWN)]}

    def _path(self, pool: str, slot: int, rid: Any, seq: int) -> str:
        told = self._told.get((pool, slot, seq))
        if told is not None:
            return told
        path = next((what for when, what in self._events.get(rid, ()) if when > seq), None)
        if path is None:  # nothing happened to it since, or too long ago to remember
            return "no exit recorded" if rid is None or rid in self._events else "unknown"
        self._told[pool, slot, seq] = path
        if len(self._told) > 4 * EVENTS_KEPT:
            self._told.clear()
        return path


def _waiting_owned(waiting: Iterable[Any]) -> dict[str, set[int]]:
    """The slots waiting requests own: their KV indices (full pool) and state slot (mamba)."""
    owned: dict[str, set[int]] = {"full": set(), "mamba": set()}
    for req in waiting:
        owned["full"].update(_ids(getattr(req, "kv_indices", None)))
        owned["mamba"].update(_ids(getattr(req, "state_slot", None)))
    return owned


def _ids(value: Any) -> list[int]:
    """Slot ids as ints, from an int tensor, a list of them, an int, or None."""
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        out = tolist()
        return out if isinstance(out, list) else [out]
    return [int(v) for v in value]


def _call(obj: Any, name: str) -> Any:
    method = getattr(obj, name, None)
    return method() if callable(method) else None


def _wrap(allocator: Any, name: str, record: Callable[[Any], None]) -> bool:
    """Replace ``allocator.<name>`` by a recording wrapper; False if it cannot be set.
    ``alloc`` records its result, ``free`` its argument (before the pool reuses the ids)."""
    original = getattr(allocator, name, None)
    if not callable(original):
        return False
    if name == "alloc":
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            record(result)
            return result
    else:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if args:
                record(args[0])
            return original(*args, **kwargs)
    try:
        setattr(allocator, name, wrapper)
    except (AttributeError, TypeError):  # __slots__ or a read-only proxy
        return False
    return True
