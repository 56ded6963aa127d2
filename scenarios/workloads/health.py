"""SGLang's idle self-check, kept as numbers the harness can budget.

With no request running nothing outside the tree holds a slot, so every pool's
books must balance (``available + evictable + protected == size``: the check
that caught #35270's double-counted shared pages and #16067's Mamba slot kept
by a request that failed to schedule; what open streaming sessions keep counts
as ``session_held``, SGLang #23496), and nothing may stay locked but what the
cache's own copies in flight and open sessions' prefixes hold (a forgotten
``dec_lock_ref``). Such leaks
barely move RSS and only show at idle, so they are read at every idle moment
and kept until the next one: a level gauge that a ``<= 0`` budget judges. Slots
locked only by copies in flight (``in_transfer``) are excused here; a load with quiet
stretches reads what is still in transfer after one (``scenarios.workloads.quiet``,
gauge ``held_in_transfer``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from scenarios.workloads.locks import LockLedger
from scenarios.workloads.protocol import PrefixCache, as_tables
from scenarios.workloads.slots import Serving, SlotLedger

# Departed requests remembered with the path they left by: enough for those that left
# since the last idle moment (a ring: filling a bigger one reads as heap growth).
LEFT_KEPT = 256
STALE_SHOWN = 5  # stale entries named per table


@dataclass
class IdleCheck:
    """The latest idle moment's findings, sticky until the next idle moment."""

    has_books: bool  # the cache implements pool_accounting()
    checks: int = 0  # idle moments at which the books were read
    mismatch: int = 0  # slots the books were off by, summed over pools (absolute)
    locked: int = 0  # KV tokens locked, not counting those copies in flight hold
    ledger: LockLedger | None = None  # where the locks were taken (a lock leak's cause)
    # With locks held at idle: the nodes still locked and their lock sites.
    unreleased: dict[str, Any] = field(default_factory=dict)
    has_tables: bool = False  # the cache implements request_tables()
    stale: int = 0  # entries of per-request tables for requests that have left
    # With stale entries: per table, how each of the first few requests left.
    stale_tables: dict[str, dict[int, str]] = field(default_factory=dict)
    _left: OrderedDict[int, str] = field(default_factory=OrderedDict)
    slots: SlotLedger | None = None  # where the slots were allocated (a book leak's cause)
    serving: Serving = field(default_factory=Serving)  # the request served, for the ledger

    @classmethod
    def for_cache(cls, cache: PrefixCache) -> IdleCheck:
        ledger = LockLedger(cache)
        has_books = callable(getattr(cache, "pool_accounting", None))
        serving = Serving()
        slots = SlotLedger(cache, serving) if has_books else None
        return cls(has_books=has_books, ledger=ledger if ledger.active else None,
                   has_tables=callable(getattr(cache, "request_tables", None)),
                   slots=slots if slots is not None and slots.active else None,
                   serving=serving)

    def request_event(self, rid: int, what: str) -> None:
        """Request ``rid`` left by path ``what`` (or its admission failed): the exit
        path the slot ledger gives a slot its request allocated before."""
        if self.slots is not None and self.slots.armed:
            self.slots.event(rid, what)

    def departed(self, rid: int, path: str) -> None:
        """A request left by ``path`` (the last few thousand are kept, to name the path
        that forgot a table entry)."""
        self._left[rid] = path
        if len(self._left) > LEFT_KEPT:
            self._left.popitem(last=False)

    def run(self, cache: PrefixCache, waiting_states: int = 0,
            live: set[int] | None = None,
            waiting: Callable[[], Iterable[Any]] = tuple) -> None:
        """Read the books now; the caller makes sure no request is running.

        ``waiting_states``: Mamba state slots that waiting requests own (forked
        when the policy matched them): allocated, outside the tree, not lost;
        ``waiting``: the waiting requests, asked only when the books are short."""
        short = self._read_books(cache, waiting_states)
        if self.has_tables and live is not None:
            self._read_tables(cache, live)
        if self.ledger is not None:
            self.unreleased = self.ledger.still_locked() if self.locked > 0 else {}
        if self.slots is not None:
            self.slots.read(short, waiting() if any(n > 0 for n in short.values()) else ())

    def held_after_quiet(self, cache: PrefixCache) -> tuple[dict[str, int], dict[str, int]]:
        """What each pool's books count as held only by copies in flight (``in_transfer``)
        and the tree's copies a lock for work in flight still holds (``locked_copies()``,
        if the cache has it): read at the end of a quiet stretch, where all of it is held
        (``quiet.py``)."""
        if not self.has_books:
            return {}, {}
        in_transfer = {name: account.in_transfer
                       for name, account in cache.pool_accounting().items()
                       if account.in_transfer > 0}
        read_locked = getattr(cache, "locked_copies", None)
        locked = dict(read_locked()) if callable(read_locked) else {}
        return in_transfer, {name: slots for name, slots in locked.items() if slots > 0}

    def _read_tables(self, cache: PrefixCache, live: set[int]) -> None:
        """Entries for requests neither waiting nor running are stale: an exit path forgot
        them (SGLang #9874 left ``ongoing_prefetch`` entries of aborted requests)."""
        self.stale, before = 0, self.stale_tables
        self.stale_tables = {}
        for table, rids in as_tables(cache.request_tables()).items():
            gone = [rid for rid in rids if rid not in live]
            self.stale += len(gone)
            if gone:
                # Keep the path of the entries shown, which stay stale across idle moments.
                shown = before.get(table, {})
                self.stale_tables[table] = {rid: self._left.get(rid) or shown.get(rid, "unknown")
                                            for rid in gone[:STALE_SHOWN]}

    def _read_books(self, cache: PrefixCache, waiting_states: int) -> dict[str, int]:
        """Reads the books; returns the slots each pool is short by (missing: lost)."""
        if not self.has_books:
            self.locked = cache.full_protected_size()
            return {}
        books = cache.pool_accounting()
        self.checks += 1
        # Absolute per pool: one pool short and another over must not cancel out.
        off = {name: account.mismatch + (waiting_states if name == "mamba" else 0)
               for name, account in books.items()}
        self.mismatch = sum(abs(n) for n in off.values())
        full = books.get("full")
        if full is None:
            self.locked = cache.full_protected_size()
        else:
            # Copies in flight and open sessions' prefixes hold their locks by design.
            self.locked = full.protected - full.in_transfer - full.session_locked
        return {name: -n for name, n in off.items()}
