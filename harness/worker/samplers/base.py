"""The one small protocol every sampler follows, and the helpers they share.

The worker calls ``start`` once after the workload is built, ``poll`` between
workload steps (cheap unless a sample is due), and ``stop`` at the end, in the
order of ``harness.samplers.build_samplers``. A sampler that cannot work here
says why through ``unavailable()``; the worker records that as an event and
runs without it instead of crashing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

Clock = Callable[[], float]


class Sink(Protocol):
    """Where samples go (``harness.stream.SampleWriter``, or a test double)."""

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
