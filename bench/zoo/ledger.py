"""The pacing clock and exact count every zoo cache keeps of what it holds.

A leak in the zoo is paid at its real site whenever that site runs: the site
asks :meth:`Ledger.owed` how far the retained total has fallen behind
``rate * elapsed`` (wall time, ``time.monotonic``), retains that much, then
books what it really retained with :meth:`Ledger.add`, measured on the
objects themselves (``sys.getsizeof``, storage bytes, mapping length). So the
ledger is the truth the harness's estimate is compared with, whatever the
pacing's rounding. Payments come in quanta of at least ``quantum`` so a
site called thousands of times a second does not retain a byte at a time.

Non-leaks use the same object to count what they hold now (``add`` and
``remove``): their ledger rises and falls but stays bounded.
"""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Callable, Sequence
from itertools import cycle, islice

QUANTUM = 4096  # bytes (or tokens) below which a site does not pay yet
SMALL_INTS = range(-5, 257)  # CPython's cached ints: shared, never owned by a list
INT_BYTES = sys.getsizeof(1000)  # one token id above the cache (28 on 64-bit)
SLOT_BYTES = 8  # a list's pointer to one element


class Ledger:
    """Pacing on the wall clock plus an exact running total of what is held."""

    def __init__(
        self,
        rate_per_h: float,
        quantum: int = QUANTUM,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_per_h < 0:
            raise ValueError(f"a zoo rate must be >= 0, got {rate_per_h}")
        self.rate_per_h = rate_per_h
        self.quantum = quantum
        self.clock = clock
        self.started = clock()
        self.total = 0

    def due(self) -> float:
        """What the leak should have retained by now."""
        return self.rate_per_h * (self.clock() - self.started) / 3600.0

    def owed(self) -> int:
        """How far the total is behind, once that is at least a quantum; else 0."""
        short = int(self.due()) - self.total
        return short if short >= self.quantum else 0

    def add(self, amount: int) -> None:
        self.total += amount

    def remove(self, amount: int) -> None:
        self.total -= amount


def fresh_tokens(tokens: Sequence[int], count: int) -> list[int]:
    """``count`` token ids cycled from ``tokens``, each a new int object.

    A detokenizer's ``output_ids`` come from a buffer (``tensor.tolist()``), so
    every id is an int of its own; reading them back from an ``array`` does the
    same here, which makes the ints belong to the list alone and its size exact.
    """
    return array("q", islice(cycle(tokens or (0,)), count)).tolist()


def tokens_for(owed: int) -> int:
    """How many fresh token ids come to about ``owed`` bytes (list and ints)."""
    return max(1, owed // (SLOT_BYTES + INT_BYTES))


def list_bytes(tokens: list[int]) -> int:
    """Exact bytes of a list of fresh ints: the list object plus its own ints."""
    own = sum(sys.getsizeof(t) for t in tokens if t not in SMALL_INTS)
    return sys.getsizeof(tokens) + own
