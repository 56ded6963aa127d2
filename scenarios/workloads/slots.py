"""Where the slots a pool's idle books miss were allocated: the cause of a book leak.

A pool slot that one exit path forgets to give back (a Mamba state slot of an
aborted queued request, the in-flight KV slot of a retracted request) shows only
as books that come up short at idle (``idle_pool_mismatch``); the count says
nothing of which call took the slots. The ledger wraps, on the instance, the
``alloc`` and ``free`` of each allocator the cache names in its optional
``pool_allocators()`` and remembers, per live slot id, the allocating call site
(the frames into the code under test, interned: one index per distinct stack),
the request the call served (a ``req`` or ``run`` local of the first frame that
has one) and when, packed into one int64 per slot of an ``array('q')`` as long as
the pool (a short call's ids are written one by one, a long one's through a tensor
over the same memory); ``free`` clears the ids. Requests live in a ring of fixed size indexed by
their id's hash, with their first few lifecycle events. So the ledger allocates
no Python object per slot or per request: its memory does not grow while the
cache fills (a fixed run's ``py_blocks`` would see it), and nothing is walked
until the books are short.

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
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import Any

import torch

from harness.worker.frames import short

STACK_DEPTH = 4  # frames kept per site, innermost first, up to the scenario driver
RID_DEPTH = 8  # frames searched for the request an allocation serves
RING = 1 << 13  # requests remembered (by their id's hash), with their events
EVENTS = 4  # lifecycle events kept per request (the last ones): the first after an
# allocation is the path of the slots it allocated
SITE_BITS = RID_BITS = 13
MAX_SITES = (1 << SITE_BITS) - 1  # stacks past this many share the last index
GROUPS_SHOWN = 3
REQUESTS_SHOWN = 5
READ_EVERY_S = 0.5  # the lost slots are worked out at most this often
SHORT_CALL = 64  # ids written one by one up to this many (a tensor write costs ~20 us)
DRIVER = ("/scenarios/workloads/",)  # the harness's scheduler: where the stack stops
REQUEST_LOCALS = ("req", "run", "waiting")  # locals that hold the request being served
UNKNOWN_RID = -1


class PoolLedger:
    """Per slot id of one allocator: -1 when free, else (alloc seq, site, request) packed."""

    def __init__(self, name: str, allocator: Any, owner: SlotLedger) -> None:
        self.name = name
        self._resize(int(getattr(allocator, "size", 0) or 0) + 1)
        self._owner = owner
        self.active = _wrap(allocator, "alloc", self._alloc) and _wrap(
            allocator, "free", self._free)

    def _resize(self, n: int) -> None:
        old = getattr(self, "_array", array("q"))
        self._array = old + array("q", [-1]) * (n - len(old))
        self._view = torch.frombuffer(self._array, dtype=torch.int64)  # the same memory

    def _alloc(self, result: Any) -> None:
        if result is not None:
            self._write(result, -2)

    def _free(self, ids: Any) -> None:
        if ids is not None:
            self._write(ids, -1)

    def _write(self, ids: Any, value: int) -> None:
        if isinstance(ids, int):
            ids = [ids]
        elif isinstance(ids, torch.Tensor):
            if ids.numel() > SHORT_CALL:
                if value == -2:
                    value = self._owner.entry(sys._getframe(3))
                self._write_tensor(ids.reshape(-1), value)
                return
            ids = ids.tolist()
            if isinstance(ids, int):  # a 0-d tensor
                ids = [ids]
        if not ids:
            return
        if value == -2:
            value = self._owner.entry(sys._getframe(3))
        packed = self._array
        try:
            for i in ids:
                packed[i] = value
        except IndexError:  # ids past the allocator's size (a padding slot)
            self._resize(max(int(i) for i in ids) + 1)
            self._write(ids, value)

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
    def __init__(self, cache: Any) -> None:
        allocators = _call(cache, "pool_allocators") or {}
        held = getattr(cache, "held_slots", None)
        self._held: Callable[[], Mapping[str, Any]] | None = held if callable(held) else None
        pools = {str(name): PoolLedger(str(name), allocator, self)
                 for name, allocator in dict(allocators).items()}
        self.pools = {name: pool for name, pool in pools.items() if pool.active}
        self.active = bool(self.pools) and self._held is not None
        self._sites: dict[tuple[tuple[str, int, str], ...], int] = {}
        self._stacks: list[tuple[str, ...]] = []
        self._seq = 0
        # The ring of requests, preallocated: its slots are replaced, never added.
        self._rids: list[Any] = [object() for _ in range(RING)]
        self._since = array("q", [0]) * RING  # seq at which the request took the slot
        self._events = array("q", [-1]) * (RING * EVENTS)  # seq << 8 | path, per request
        self._counts = array("q", [0]) * RING
        self._paths: list[str] = []
        # (caller's code and line, its caller's) -> (site, depth and local of the request)
        self._callers: dict[tuple[Any, ...], tuple[int, int, str | None]] = {}
        self._read_at = -READ_EVERY_S
        # A lost slot's request and path once found (only lost slots: bounded by the pools)
        self._told: dict[tuple[str, int, int], tuple[Any, str]] = {}
        self.lost: list[dict[str, Any]] = []  # the latest short idle moment's findings

    # ------------------------------------------------------------------ recording
    def entry(self, frame: FrameType | None) -> int:
        """The packed site, request and sequence number of an allocation whose caller
        is ``frame``. The stack is walked once per distinct caller and its caller (the
        site, and how far up the request's frame is); after that only that frame's
        locals are read."""
        if frame is None:
            return self._pack(MAX_SITES, None)
        up = frame.f_back
        key = (frame.f_code, frame.f_lineno, up.f_code if up else None, up.f_lineno if up else 0)
        known = self._callers.get(key)
        if known is None:
            known = self._callers[key] = self._walk(frame)
        site, depth, name = known
        rid = None
        if name is not None:
            found: FrameType | None = frame
            for _ in range(depth):
                found = found.f_back if found is not None else None
            if found is not None:
                value = found.f_locals.get(name)
                value = getattr(value, "req", value)  # a Running or Waiting entry holds the Req
                rid = getattr(value, "rid", None)
        return self._pack(site, rid)

    def _pack(self, site: int, rid: Any) -> int:
        self._seq += 1
        slot = self._slot(rid) if rid is not None else (1 << RID_BITS) - 1
        return (self._seq << (SITE_BITS + RID_BITS)) | (site << RID_BITS) | slot

    def _walk(self, frame: FrameType | None) -> tuple[int, int, str | None]:
        """The site of a new caller, and the depth and local name of the request's frame."""
        key: list[tuple[str, int, str]] = []
        found: tuple[int, str] | None = None
        depth = 0
        while frame is not None and depth < RID_DEPTH:
            code = frame.f_code
            in_driver = any(part in code.co_filename for part in DRIVER)
            if len(key) < STACK_DEPTH and not in_driver:
                key.append((code.co_filename, frame.f_lineno, code.co_name))
            if found is None:
                name = next((n for n in REQUEST_LOCALS if n in code.co_varnames), None)
                if name is not None:
                    found = (depth, name)
            if in_driver and (found is not None or key):
                break
            frame = frame.f_back
            depth += 1
        stack = tuple(key)
        site = self._sites.get(stack)
        if site is None:
            site = min(len(self._stacks), MAX_SITES)
            if site < MAX_SITES:
                self._sites[stack] = site
                self._stacks.append(tuple(f"{short(f)}:{line} in {name}"
                                          for f, line, name in stack))
        return (site, found[0], found[1]) if found else (site, 0, None)

    def _slot(self, rid: Any) -> int:
        """The ring slot of request ``rid``, taken over (events cleared) if another held it."""
        slot = hash(rid) & (RING - 1)
        if slot == RING - 1:
            slot -= 1  # the last index means "no request"
        if self._rids[slot] != rid:
            self._rids[slot] = rid
            self._since[slot] = self._seq
            self._events[slot * EVENTS:(slot + 1) * EVENTS] = array("q", [-1]) * EVENTS
            self._counts[slot] = 0
        return slot

    def event(self, rid: Any, what: str) -> None:
        """Something happened to request ``rid``: it left by a path, or its admission failed."""
        self._seq += 1
        slot = self._slot(rid)
        n = self._counts[slot]
        if what not in self._paths:
            self._paths.append(what)
        row = slot * EVENTS
        if n >= EVENTS:  # keep the last ones: a request retracted again and again
            self._events[row:row + EVENTS - 1] = self._events[row + 1:row + EVENTS]
        self._events[row + min(n, EVENTS - 1)] = (self._seq << 8) | self._paths.index(what)
        self._counts[slot] = n + 1

    # ------------------------------------------------------------------ at idle
    def read(self, short: Mapping[str, int], waiting: Iterable[Any]) -> None:
        """The lost slots of every pool whose books are ``short`` (slots missing, by
        pool), by site and exit path; call with no request running."""
        short_pools = {name: n for name, n in short.items() if name in self.pools and n > 0}
        if not short_pools:
            self.lost = []
            return
        now = time.monotonic()
        if self.lost and now - self._read_at < READ_EVERY_S:
            return
        self._read_at = now
        held = dict(self._held() if self._held is not None else {})
        owned = _waiting_owned(waiting)
        lost = []
        for name, short_by in short_pools.items():
            if name not in held:
                continue
            pool = self.pools[name]
            live = pool.live()
            tree = _tensor(held[name])
            keep = torch.cat([tree if tree is not None else _EMPTY, *owned.get(name, [])])
            gone = live[~torch.isin(live, keep)] if keep.numel() else live
            lost.append(self._grouped(name, short_by, gone.tolist(),
                                      pool.packed[gone].tolist()))
        self.lost = lost

    def _grouped(self, pool: str, short_by: int, ids: list[int], entries: list[int]
                 ) -> dict[str, Any]:
        groups: Counter[tuple[int, str]] = Counter()
        requests: dict[tuple[int, str], list[str]] = {}
        for slot_id, packed in zip(ids, entries, strict=True):
            seq = packed >> (SITE_BITS + RID_BITS)
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
        if slot == RING - 1:
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
