"""Where the slots a pool's idle books miss were allocated: the cause of a book leak.

A pool slot that one exit path forgets to give back (a Mamba state slot of an
aborted queued request, the in-flight KV slot of a retracted request) shows only
as books that come up short at idle (``idle_pool_mismatch``); the count says
nothing of which call took the slots. The ledger wraps, on the instance, the
``alloc`` and ``free`` of each allocator the cache names in its optional
``pool_allocators()`` and remembers, per live slot id, the allocating call site
(the frames into the code under test, interned: one index per distinct stack,
looked up by the ids of the caller's and its caller's code and their lines), the
request the call served (the scheduler names it in ``Serving`` before each
request's cache calls) and when, packed into one int64 per slot of an
``array('q')`` as long as the pool (a short call's ids are written one by one, a
long one's through a tensor over the same memory); ``free`` clears the ids.
Requests live in a ring of fixed size indexed by their id's hash, with their last
few lifecycle events. So the ledger allocates no Python object per slot or per
request: its memory does not grow while the cache fills (a fixed run's
``py_blocks`` would see it).

What it costs decides when it records. Wrapped, the allocators cost the scheduler
+9% to +19% CPU per step on the reference caches (``make slot-ledger-cost``: the
wrappers run some ten times a step, each a few microseconds in a cold cache, and
the bare extra frame alone is 2-3%), far past the samplers' 3%. So it starts
disarmed: nothing is wrapped or made, and a run whose books balance pays nothing
(-1.9% to +1.3% measured, as noisy as the same scheduler twice). The first idle moment
whose books are short arms it; from then on every allocation is recorded. The
slots lost before that are in the books' count but not found (the "Where it
grows" line gives both counts): a leak that keeps losing slots is named by the
ones lost after, a loss that never recurs only by its count. ``arm()`` records
from the start (the tests do).

At an idle moment whose books are short on a pool, the lost slots are the ledger's
live ids less those the cache's own structure holds (its optional
``held_slots()``: the ids its tree holds, which ``evictable + protected``
count, and those open streaming sessions keep, which ``session_held`` counts)
and less those waiting requests own (``kv_indices``, ``state_slot``). Each
lost slot's exit path is the first thing that happened to its request after the
allocation: the path it left by (``abort-waiting``, ``retract``, ``finish``...)
or ``failed-schedule`` (its admission failed and it went back to the queue); a
session's turn is told as leaving when its session closes (``session-close``,
``scenarios.workloads.sessions``), since the session keeps what the turn allocated.
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
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import Any

import torch

from harness.worker.frames import short

STACK_DEPTH = 4  # frames kept per site, innermost first, up to the scenario driver
WALK_DEPTH = 8  # frames looked at for them
RING = 1 << 13  # requests remembered (by their id's hash), with their events
EVENTS = 4  # lifecycle events kept per request (the last ones): the first after an
# allocation is the path of the slots it allocated
SITE_BITS = RID_BITS = 13
SEQ_SHIFT = SITE_BITS + RID_BITS
MAX_SITES = (1 << SITE_BITS) - 1  # stacks past this many share the last index
NO_REQUEST = RING - 1  # the ring index of an allocation no request was named for
MAX_CALLERS = 1 << 14  # caller lines remembered; past this many, each new one is walked
GROUPS_SHOWN = 3
REQUESTS_SHOWN = 5
READ_EVERY_S = 0.5  # the lost slots are worked out at most this often
SHORT_CALL = 64  # ids written one by one up to this many (a tensor write costs ~3 us)
DRIVER = ("/scenarios/workloads/",)  # the harness's scheduler: where the stack stops


class Serving:
    """The request the cache's calls serve now (``rid``; None between requests): the
    scheduler sets it before each request's calls, the ledger stamps allocations with it."""

    __slots__ = ("rid",)

    def __init__(self) -> None:
        self.rid: Any = None


class PoolLedger:
    """Per slot id of one allocator: -1 when free, else (alloc seq, site, request) packed.
    Made when the ledger arms, which wraps the allocator's ``alloc`` and ``free``."""

    def __init__(self, name: str, allocator: Any, owner: SlotLedger) -> None:
        self.name = name
        self._owner = owner
        self._resize(int(getattr(allocator, "size", 0) or 0) + 1)
        self.active = _wrap(allocator, "alloc", self._recording_alloc)
        if self.active and not _wrap(allocator, "free", self._recording_free):
            allocator.__dict__.pop("alloc", None)  # both or neither
            self.active = False

    def _resize(self, n: int) -> None:
        old = getattr(self, "_array", array("q"))
        self._array = old + array("q", [-1]) * (n - len(old))
        self._view = torch.frombuffer(self._array, dtype=torch.int64)  # the same memory

    def _recording_alloc(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``alloc`` stamping the ids it returns with its caller's site and the request
        being served. It runs on every allocation of the step, so what it uses are
        closure locals, a known caller costs a dict look-up, not a stack walk, and the
        common case (a 1-D tensor of a few ids) is written here: a method call costs
        about what the writes do."""
        owner, write, getframe = self._owner, self.write, sys._getframe
        callers, serving, place, pool = owner.callers, owner.serving, owner.place, self

        def alloc(*args: Any, **kwargs: Any) -> Any:
            ids = original(*args, **kwargs)
            if ids is None:
                return ids
            caller = getframe(1)
            up = caller.f_back
            # By id: hashing a code object hashes its constants (~0.15 us each); the
            # ledger keeps the code objects, so their ids are never reused.
            key = ((id(caller.f_code), caller.f_lineno, id(up.f_code), up.f_lineno)
                   if up is not None else (id(caller.f_code), caller.f_lineno, 0, 0))
            site = callers.get(key)
            if site is None:
                site = owner.new_caller(key, caller)
            rid = serving.rid
            owner.seq = seq = owner.seq + 1
            entry = (seq << SEQ_SHIFT) | (site << RID_BITS) | (
                NO_REQUEST if rid is None else place(rid))
            if type(ids) is torch.Tensor and ids.dim() == 1 and ids.numel() <= SHORT_CALL:
                packed = pool._array
                try:
                    for i in ids.tolist():
                        packed[i] = entry
                except IndexError:  # past the allocator's size: write() grows the array
                    write(ids, entry)
            else:
                write(ids, entry)
            return ids
        return alloc

    def _recording_free(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``free`` forgetting the ids before the pool takes them back (and may hand
        them out again); the common case written here, as in ``alloc``."""
        write, pool = self.write, self

        def free(*args: Any, **kwargs: Any) -> Any:
            ids = args[0] if args else next(iter(kwargs.values()), None)
            if type(ids) is torch.Tensor and ids.dim() == 1 and ids.numel() <= SHORT_CALL:
                packed = pool._array
                try:
                    for i in ids.tolist():
                        packed[i] = -1
                except IndexError:
                    write(ids, -1)
            elif ids is not None:
                write(ids, -1)
            return original(*args, **kwargs)
        return free

    def write(self, ids: Any, value: int) -> None:
        """``value`` for each of ``ids`` (a tensor, a list of ints, an int)."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                ids = ids.reshape(-1)
            if ids.numel() > SHORT_CALL:
                self._write_tensor(ids, value)
                return
            ids = ids.tolist()
        elif isinstance(ids, int):
            ids = (ids,)
        packed = self._array
        try:
            for i in ids:
                packed[i] = value
        except IndexError:  # ids past the allocator's size (a padding slot)
            self._resize(max(int(i) for i in ids) + 1)
            self.write(ids, value)

    def _write_tensor(self, ids: torch.Tensor, value: int) -> None:
        try:
            self._view[ids] = value
        except (IndexError, RuntimeError):
            self._resize(int(ids.max()) + 1)
            self._view[ids] = value

    @property
    def packed(self) -> torch.Tensor:
        return self._view

    def live(self) -> torch.Tensor:
        return (self._view >= 0).nonzero().flatten()


class SlotLedger:
    """Disarmed (the allocators untouched, nothing recorded) until ``read`` first sees a
    pool's books short, or ``arm`` is called."""

    def __init__(self, cache: Any, serving: Serving | None = None) -> None:
        self.serving = serving if serving is not None else Serving()
        self._allocators = {str(name): allocator for name, allocator
                            in dict(_call(cache, "pool_allocators") or {}).items()}
        held = getattr(cache, "held_slots", None)
        self._held: Callable[[], Mapping[str, Any]] | None = held if callable(held) else None
        self.active = self._held is not None and any(
            callable(getattr(a, "alloc", None)) and callable(getattr(a, "free", None))
            for a in self._allocators.values())
        self.armed = False
        self.pools: dict[str, PoolLedger] = {}
        self.seq = 0
        # (caller's code id and line, its caller's) -> site; the code objects kept
        self.callers: dict[tuple[int, int, int, int], int] = {}
        self._codes: list[Any] = []
        self._sites: dict[tuple[tuple[str, int, str], ...], int] = {}
        self._stacks: list[tuple[str, ...]] = []
        self._paths: list[str] = []
        self._path_ids: dict[str, int] = {}
        self._read_at = -READ_EVERY_S
        # A lost slot's request and path once found (only lost slots: bounded by the pools)
        self._told: dict[tuple[str, int, int], tuple[Any, str]] = {}
        self.lost: list[dict[str, Any]] = []  # the latest short idle moment's findings

    # ------------------------------------------------------------------ recording
    def arm(self) -> None:
        """Start recording: wrap the allocators, make the slot arrays and the ring of
        requests (preallocated: its places are replaced, never added)."""
        if self.armed:
            return
        self.armed = True
        self._rids: list[Any] = [None] * RING
        self._since = array("q", [0]) * RING  # seq at which the request took the place
        self._events = array("q", [-1]) * (RING * EVENTS)  # seq << 8 | path, per request
        self._counts = array("q", [0]) * RING
        pools = {name: PoolLedger(name, allocator, self)
                 for name, allocator in self._allocators.items()}
        self.pools = {name: pool for name, pool in pools.items() if pool.active}

    def new_caller(self, key: tuple[int, int, int, int], frame: FrameType) -> int:
        """The site of an allocating caller line (and its caller's) not seen before: its
        stack into the code under test, walked now and interned."""
        site = self._site(_frames_into_code(frame))
        if len(self.callers) < MAX_CALLERS:
            self.callers[key] = site
            up = frame.f_back
            self._codes.append((frame.f_code, up.f_code if up is not None else None))
        return site

    def _site(self, stack: tuple[tuple[str, int, str], ...]) -> int:
        site = self._sites.get(stack)
        if site is None:
            site = min(len(self._stacks), MAX_SITES)
            if site < MAX_SITES:
                self._sites[stack] = site
                self._stacks.append(tuple(f"{short(f)}:{line} in {name}"
                                          for f, line, name in stack))
        return site

    def place(self, rid: Any) -> int:
        """The ring slot of request ``rid``, taken over (events cleared) if another held it."""
        slot = hash(rid) & (RING - 1)
        if slot == NO_REQUEST:
            slot -= 1
        if self._rids[slot] != rid:
            self._rids[slot] = rid
            self._since[slot] = self.seq
            self._events[slot * EVENTS:(slot + 1) * EVENTS] = array("q", [-1]) * EVENTS
            self._counts[slot] = 0
        return slot

    def event(self, rid: Any, what: str) -> None:
        """Something happened to request ``rid``: it left by a path, or its admission failed."""
        if not self.armed:
            return
        self.seq += 1
        slot = self.place(rid)
        path = self._path_ids.get(what)
        if path is None:
            path = self._path_ids[what] = len(self._paths)
            self._paths.append(what)
        n = self._counts[slot]
        row = slot * EVENTS
        if n >= EVENTS:  # keep the last ones: a request retracted again and again
            self._events[row:row + EVENTS - 1] = self._events[row + 1:row + EVENTS]
        self._events[row + min(n, EVENTS - 1)] = (self.seq << 8) | path
        self._counts[slot] = n + 1

    # ------------------------------------------------------------------ at idle
    def read(self, short: Mapping[str, int], waiting: Iterable[Any]) -> None:
        """The lost slots of every pool whose books are ``short`` (slots missing, by
        pool), by site and exit path; call with no request running."""
        short_pools = {name: n for name, n in short.items()
                       if name in self._allocators and n > 0}
        over_pools = {name: -n for name, n in short.items() if n < 0}
        if not short_pools:
            self.lost = self._counted_twice(over_pools) if over_pools else []
            return
        if not self.armed:  # the first short books: record from now on
            self.arm()
            return
        now = time.monotonic()
        if self.lost and now - self._read_at < READ_EVERY_S:
            return
        self._read_at = now
        held = dict(self._held() if self._held is not None else {})
        owned = _waiting_owned(waiting)
        lost = []
        for name, short_by in short_pools.items():
            if name not in held or name not in self.pools:
                continue
            pool = self.pools[name]
            live = pool.live()
            tree = _tensor(held[name])
            keep = torch.cat([tree if tree is not None else _EMPTY, *owned.get(name, [])])
            gone = live[~torch.isin(live, keep)] if keep.numel() else live
            lost.append(self._grouped(name, short_by, gone.tolist(),
                                      pool.packed[gone].tolist()))
        self.lost = lost

    def _counted_twice(self, over: Mapping[str, int]) -> list[dict[str, Any]]:
        """Pools whose books hold more than the pool (SGLang's "pool memory leak detected"
        the other way round): the slot ids the tree holds under two nodes or more, which
        ``evictable + protected`` count again and a later eviction frees again. Read
        from ``held_slots()`` alone, at most every READ_EVERY_S."""
        now = time.monotonic()
        if self.lost and now - self._read_at < READ_EVERY_S:
            return self.lost
        self._read_at = now
        held = dict(self._held() if self._held is not None else {})
        found = []
        for name, over_by in over.items():
            ids = _tensor(held.get(name))
            if ids is None or not ids.numel():
                continue
            unique, counts = torch.unique(ids, return_counts=True)
            twice = counts > 1
            if bool(twice.any()):
                found.append({"pool": name, "over": over_by, "twice": int(twice.sum()),
                              "extra": int((counts[twice] - 1).sum()),
                              "example": int(unique[twice][0])})
        return found

    def _grouped(self, pool: str, short_by: int, ids: list[int], entries: list[int]
                 ) -> dict[str, Any]:
        groups: Counter[tuple[int, str]] = Counter()
        requests: dict[tuple[int, str], list[str]] = {}
        for slot_id, packed in zip(ids, entries, strict=True):
            seq = packed >> SEQ_SHIFT
            site = (packed >> RID_BITS) & ((1 << SITE_BITS) - 1)
            told = self._told.get((pool, slot_id, seq))
            if told is None:
                told = self._path(packed & ((1 << RID_BITS) - 1), seq)
                if told[1] not in ("unknown", "no exit recorded"):  # known for good
                    self._told[pool, slot_id, seq] = told
            rid, path = told
            groups[site, path] += 1
            shown = requests.setdefault((site, path), [])
            if rid is not None and len(shown) < REQUESTS_SHOWN and str(rid) not in shown:
                shown.append(str(rid))
        return {"pool": pool, "short": short_by, "found": len(entries), "groups": [
            {"site": self._site_text(site), "stack": list(self._stack(site)), "exit": path,
             "slots": n, "requests": requests[site, path]}
            for (site, path), n in groups.most_common(GROUPS_SHOWN)]}

    def _stack(self, site: int) -> tuple[str, ...]:
        return self._stacks[site] if site < len(self._stacks) else ()

    def _site_text(self, site: int) -> str:
        stack = self._stack(site)
        return stack[0] if stack else "an allocation outside the code under test"

    def _path(self, slot: int, seq: int) -> tuple[Any, str]:
        """The request of a slot allocated at ``seq`` and the first thing that happened
        to it afterwards."""
        if slot == NO_REQUEST:
            return None, "no request"
        if int(self._since[slot]) > seq:  # another request took the ring slot since
            return None, "unknown"
        events = [e for e in self._events[slot * EVENTS:(slot + 1) * EVENTS] if e >= 0]
        after = [e for e in events if e >> 8 > seq]
        if not after:
            return self._rids[slot], "no exit recorded"
        if self._counts[slot] > EVENTS and after[0] == events[0]:  # earlier ones dropped
            return self._rids[slot], "unknown"
        return self._rids[slot], self._paths[after[0] & 0xFF]


_EMPTY = torch.empty(0, dtype=torch.int64)


def _waiting_owned(waiting: Iterable[Any]) -> dict[str, list[torch.Tensor]]:
    """The slots waiting requests own: their KV indices (full pool) and state slot (mamba)."""
    owned: dict[str, list[torch.Tensor]] = {"full": [], "mamba": []}
    for req in waiting:
        for pool, field in (("full", "kv_indices"), ("mamba", "state_slot")):
            ids = _tensor(getattr(req, field, None))
            if ids is not None:
                owned[pool].append(ids)
    return owned


def _tensor(value: Any) -> torch.Tensor | None:
    """Slot ids as a flat int64 tensor, from a tensor, a list of ints, an int, or None."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.reshape(-1).to(torch.int64)
    return torch.as_tensor(value, dtype=torch.int64).reshape(-1)


def _call(obj: Any, name: str) -> Any:
    method = getattr(obj, name, None)
    return method() if callable(method) else None


def _frames_into_code(frame: FrameType | None) -> tuple[tuple[str, int, str], ...]:
    """Up to ``STACK_DEPTH`` frames from ``frame`` out, into the code under test: the
    walk stops at the harness's scheduler."""
    kept: list[tuple[str, int, str]] = []
    for _ in range(WALK_DEPTH):
        if frame is None or len(kept) >= STACK_DEPTH:
            break
        code = frame.f_code
        if any(part in code.co_filename for part in DRIVER):
            break
        kept.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(kept)


def _wrap(allocator: Any, name: str,
          recording: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``allocator.<name>`` by ``recording(original)``; False if it cannot be set."""
    original = getattr(allocator, name, None)
    if not callable(original):
        return False
    try:
        setattr(allocator, name, recording(original))
    except (AttributeError, TypeError):  # __slots__ or a read-only proxy
        return False
    return True
