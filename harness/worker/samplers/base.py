"""The one small protocol every sampler follows, and the helpers they share.

The worker calls ``start`` once after the workload is built, ``poll`` between
workload steps (cheap unless a sample is due), and ``stop`` at the end, in the
order of ``harness.worker.samplers.build_samplers``. A sampler that cannot work
here says why through ``unavailable()``; the worker records that as an event
and runs without it instead of crashing.

Most samplers take a reading every so often: :class:`PeriodicSampler` holds that
logic once (start, poll when due, a final reading at stop), and a sampler only
says how to ``take`` a reading.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from harness.runfiles.records import SampleLine

Clock = Callable[[], float]


class Sink(Protocol):
    """Where samples go (``harness.runfiles.samples.SampleWriter``, or a test double)."""

    def line(self, record: SampleLine) -> None:
        """Write one sample line as the sampler built it (``t`` rounded as written)."""
        ...

    def sample(self, kind: str, t: float, **fields: Any) -> None: ...

    def event(self, name: str, t: float, **fields: Any) -> None: ...


class Sampler(Protocol):
    name: str

    def unavailable(self) -> str | None:
        """Why this sampler cannot run here, or None when it can."""
        ...

    def start(self, writer: Sink, clock: Clock) -> None: ...

    def poll(self, now: float, ops: int) -> None: ...

    def stop(self) -> None: ...


class Every:
    """A deadline on the run's clock; ``due`` is true at most once per interval."""

    def __init__(self, interval_s: float, first_at: float = 0.0) -> None:
        self.interval_s = interval_s
        self.next_at = first_at

    def due(self, now: float) -> bool:
        # A microsecond of slack: a clock stepping by exactly the interval in
        # floating point (0.1 + 0.2) must not skip every other sample.
        if now < self.next_at - 1e-6:
            return False
        # Re-anchor on ``now`` rather than adding to the old deadline: after a
        # long step we want one sample, not a burst catching up.
        self.next_at = now + self.interval_s
        return True


class BaseSampler:
    """The sink, the clock and the op count every sampler keeps between calls."""

    name = ""

    def __init__(self) -> None:
        self._sink: Sink | None = None
        self._clock: Clock | None = None
        self.ops = 0  # cumulative ops at the last poll; an int store, safe across threads

    def unavailable(self) -> str | None:
        return None

    def start(self, writer: Sink, clock: Clock) -> None:
        self._sink, self._clock = writer, clock

    def poll(self, now: float, ops: int) -> None:
        self.ops = ops

    def stop(self) -> None:
        pass

    @property
    def sink(self) -> Sink:
        if self._sink is None:
            raise RuntimeError(f"the {self.name} sampler was used before start()")
        return self._sink

    @property
    def started(self) -> bool:
        return self._clock is not None

    def now(self) -> float:
        if self._clock is None:
            raise RuntimeError(f"the {self.name} sampler was used before start()")
        return self._clock()


class PeriodicSampler(BaseSampler, ABC):
    """A reading every ``interval_s`` of the run's clock, and a last one at stop.

    By default the first reading comes one interval after start: a reading at
    t=0 would only see the build's leftovers. A sampler that needs a baseline
    overrides :meth:`on_start`.
    """

    def __init__(self, interval_s: float) -> None:
        super().__init__()
        self._every = Every(interval_s)

    def start(self, writer: Sink, clock: Clock) -> None:
        super().start(writer, clock)
        self.on_start(clock())

    def on_start(self, now: float) -> None:
        self._every.next_at = now + self._every.interval_s

    def poll(self, now: float, ops: int) -> None:
        self.ops = ops
        if self._every.due(now):
            self.take(now)

    def stop(self) -> None:
        if self.started:
            self.take(self.now(), final=True)

    @abstractmethod
    def take(self, now: float, final: bool = False) -> None:
        """Take one reading and write it to the sink; ``final`` at stop."""


_forced_depth = 0


@contextmanager
def forced_collection() -> Iterator[None]:
    """Mark ``gc.collect()`` calls made by the harness itself.

    The gc sampler skips them, so forced windows never show up as the
    workload's own collections (and their objects are not counted twice).
    """
    global _forced_depth
    _forced_depth += 1
    try:
        yield
    finally:
        _forced_depth -= 1


def harness_is_collecting() -> bool:
    return _forced_depth > 0
