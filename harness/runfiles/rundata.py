"""In-memory form of one run's raw samples, as the loader returns it.

``samples.jsonl`` (schema ``leak-harness/samples``, version 1) is a header
line, then one JSON object per sample or event; the fields of every line kind
are the TypedDicts of :mod:`harness.runfiles.records`. :class:`RunData` keeps
the numeric signals as :class:`Series` (what the statistics fit) and the
other lines as they were written, grouped by kind. :func:`clean` gives the
finite samples of a series in time order, which both the analysis and the
plots start from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from harness.runfiles.records import (
    AllocLine,
    EventLine,
    GarbageLine,
    GcLine,
    HeaderLine,
    NativeLine,
    NotesLine,
    ObjectsLine,
    OwnersLine,
)

FloatArray = npt.NDArray[np.float64]


@dataclass
class Series:
    """A time series: ``t`` in seconds since the run started, ``v`` in its unit."""

    t: FloatArray
    v: FloatArray
    unit: str = ""

    @classmethod
    def empty(cls, unit: str = "") -> Series:
        return cls(np.zeros(0), np.zeros(0), unit)

    def __len__(self) -> int:
        return int(self.t.size)


@dataclass
class RunData:
    """Everything a run recorded, grouped by kind; raw, no statistics yet."""

    header: HeaderLine
    rss: Series = field(default_factory=lambda: Series.empty("B"))
    uss: Series = field(default_factory=lambda: Series.empty("B"))
    ops: Series = field(default_factory=lambda: Series.empty("ops"))
    memory: dict[str, Series] = field(default_factory=dict)  # the ``heap`` lines' signals
    gauges: dict[str, Series] = field(default_factory=dict)
    gc_events: list[GcLine] = field(default_factory=list)
    garbage_windows: list[GarbageLine] = field(default_factory=list)
    object_windows: list[ObjectsLine] = field(default_factory=list)
    alloc_windows: list[AllocLine] = field(default_factory=list)
    native_windows: list[NativeLine] = field(default_factory=list)  # memray, when installed
    owners: list[OwnersLine] = field(default_factory=list)  # one line per run, at the end
    notes: list[NotesLine] = field(default_factory=list)  # the workload's, at loop end
    events: list[EventLine] = field(default_factory=list)

    @property
    def warmup_end_s(self) -> float | None:
        for event in self.events:
            if event.get("name") == "warmup_end":
                return float(event["t"])
        return None

    def event(self, name: str) -> EventLine | None:
        """The last event of that name, or None."""
        found = [e for e in self.events if e.get("name") == name]
        return found[-1] if found else None


def clean(t: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Float arrays without NaN samples, sorted by time (loaders may interleave)."""
    t, v = np.asarray(t, dtype=np.float64), np.asarray(v, dtype=np.float64)
    finite = np.isfinite(t) & np.isfinite(v)
    t, v = t[finite], v[finite]
    if t.size > 1 and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, v = t[order], v[order]
    return t, v
