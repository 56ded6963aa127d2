"""Long quiet stretches: what the books still count as in flight after one is held.

A cache with a host or storage tier counts a slot locked only by its own copies
in flight (write-through, load back, a storage prefetch) as ``in_transfer``
(``refcache.pools.PoolAccount``), and the idle check excuses it: it unlocks
when the copy is acknowledged. A copy whose acknowledgement never comes (a path
that forgets it) is excused forever. So a load with quiet stretches stops
taking arrivals now and then, waits until nothing runs or waits, and then lets
the event rounds run with nothing else for long enough that every copy,
transfer and acknowledgement in flight must have finished (at least
``Quiet.rounds`` event rounds and ``Quiet.seconds`` of wall time, the rounds run
back to back: the reference's copies take two rounds, SGLang's copy threads
milliseconds). Whatever any pool's books
still count as in transfer at the end of the stretch is held, and so is every
copy of the tree a lock for work in flight still holds (the cache's optional
``locked_copies()``: a storage backup's or a load back's host lock never
released): the ``held_in_transfer`` gauge of ``scenarios.workloads.health``,
budgeted ``<= 0`` in the scenarios with a host or storage tier.

Decode-only stretches are not used: a request that finishes writes its prefix
through, a copy started inside the stretch. No request arrives, waits or runs
during a stretch, so a seed's trace of requests stays the same however many
rounds the wall time asks for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Quiet:
    """When and how long. Off by default (``every`` 0)."""

    every: int = 0  # traffic steps between quiet stretches (0: none)
    rounds: int = 40  # event rounds a stretch lasts at least once nothing runs or waits
    seconds: float = 1.0  # wall time it lasts at least (its rounds back to back)

    @property
    def on(self) -> bool:
        return self.every > 0


@dataclass
class Held:
    """The last stretch's end: what each pool's books still counted as in transfer, and
    the slots of the tree's copies locks for work in flight still held."""

    pools: dict[str, int]
    rounds: int
    seconds: float
    locked: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.pools.values()) + sum(self.locked.values())

    def note(self) -> dict[str, Any]:
        return {"pools": dict(self.pools), "locked": dict(self.locked), "rounds": self.rounds,
                "seconds": round(self.seconds, 2)}


class QuietStretches:
    """The scheduler's quiet stretches: due, draining, then counting rounds."""

    def __init__(self, quiet: Quiet) -> None:
        self.quiet = quiet
        self.traffic_steps = 0  # steps that took arrivals: the load's own clock
        self.stretches = 0  # stretches completed
        self.last: Held | None = None
        self._due = False
        self._rounds = 0
        self._started = 0.0

    def withholds(self) -> bool:
        """Whether this step takes no arrivals; else the load's clock moves on."""
        if not self.quiet.on:
            self.traffic_steps += 1
            return False
        if not self._due and self.traffic_steps and self.traffic_steps % self.quiet.every == 0:
            self._due = True
        if not self._due:
            self.traffic_steps += 1
        return self._due

    def after_round(self, busy: bool, read_held: Any) -> None:
        """After the step's event round: count it if the stretch has begun (nothing
        running, waiting or in flight); at its end read the books' in-transfer counts
        and locked copies (``read_held() -> ({pool: slots}, {pool: slots locked})``)."""
        if not self._due:
            return
        if busy:
            self._rounds = 0  # still draining what was admitted before
            return
        if self._rounds == 0:
            self._started = time.monotonic()
        self._rounds += 1
        elapsed = time.monotonic() - self._started
        # Rounds back to back, no sleep: a worker that sleeps a second at a time showed
        # C heap growth by itself (himamba-exits seed 2, 20 s: +53 MB/h, 95% interval
        # 38 to 67, a 'leak'; back to back: +8 MB/h, interval -4.5 to 21, a pass).
        if self._rounds < self.quiet.rounds or elapsed < self.quiet.seconds:
            return
        in_transfer, locked = read_held()
        self.last = Held(in_transfer, self._rounds, elapsed, locked)
        self.stretches += 1
        self._due, self._rounds = False, 0
        self.traffic_steps += 1

    @property
    def held(self) -> int:
        return 0 if self.last is None else self.last.total
