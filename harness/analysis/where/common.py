"""What the evidence sources of "Where it grows" share: the finding and the site.

:class:`Finding` is one line of "Where it grows" (its ``to_json`` is what the
summary stores); :class:`Site` and :class:`Kept` are what the allocation windows
say of a source line, read by :mod:`.sites` and weighed against the C heap by
:mod:`.native`. Below every source module of the package and importing none.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The harness's own scenario driver: its synthetic traffic (conversation histories)
# and scheduler keep filling towards their bounds for minutes in every run, fixed
# or not. They drive the code under test; they are not it, so they are never named.
DRIVER_SITES = ("scenarios/workloads/",)


@dataclass(frozen=True)
class Finding:
    """One line of "Where it grows"."""

    kind: str  # python, native, cycles, owner, tensors, level
    signal: str  # what saw it: tracemalloc, heap, cyclic_garbage, objects, a gauge
    text: str  # the sentence people read
    site: str | None = None
    stack: tuple[str, ...] = ()
    owner: str | None = None
    per_h: float | None = None  # in ``unit`` per hour, when a rate is known
    unit: str = ""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["stack"] = list(self.stack)
        return data


@dataclass(frozen=True)
class Site:
    """A source line whose retained allocations grew, over the allocation windows."""

    site: str
    stack: tuple[str, ...]
    per_h: float  # median over the windows it grew in, bytes per hour
    per_kop: float | None
    windows: int  # complete windows it grew in
    of: int  # complete windows in all
    avg_bytes: float | None = None  # per allocation kept: <= 512 B lives in pymalloc's arenas
    kept: Kept | None = None  # what the run kept of the tracked objects it makes


@dataclass(frozen=True)
class Kept:
    """Of one tracked type a site makes: how many the run kept, against how many it
    would have kept had it kept all (the window's rate over the census's span)."""

    type: str
    grew: int
    span_s: float
    share: float  # grew / (made in the window, scaled to the span)
