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

import math
from collections.abc import Sequence
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
END_EVENTS = ("loop_end", "crash")  # the workload stopped: later samples are the harness's


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

    def traced_spans(self) -> list[tuple[float, float]]:
        """The (start, end) of every allocation window, from its ``attribution`` events;
        a window the run cut short has no end event: it lasts to the end of the run.

        Its samples describe tracemalloc's cost, not the program: the analysis drops
        them from every judged rate, and the report shades them."""
        starts: dict[int, float] = {}
        spans = []
        for event in self.events:
            if event.get("name") != "attribution":
                continue
            if event.get("phase") == "start":
                starts[int(event["window"])] = float(event["t"])
            elif int(event.get("window", -1)) in starts:
                spans.append((starts.pop(int(event["window"])), float(event["t"])))
        return spans + [(start, math.inf) for start in starts.values()]

    @property
    def data_end_s(self) -> float:
        """Where an analysis of the samples so far would end (see :func:`workload_end`).

        The supervisor reports it as the point an early stop decided on.
        """
        return workload_end(self, ops_series(self))


def outside(t: FloatArray, spans: Sequence[tuple[float, float]]) -> npt.NDArray[np.bool_]:
    """Which of the times ``t`` fall outside every ``(start, end)`` span (ends included
    in the span): the samples an allocation window did not slow down."""
    keep = np.ones(t.size, dtype=bool)
    for start, end in spans:
        keep &= ~((t >= start) & (t <= end))
    return keep


def clean(t: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Float arrays without NaN samples, sorted by time (loaders may interleave)."""
    t, v = np.asarray(t, dtype=np.float64), np.asarray(v, dtype=np.float64)
    finite = np.isfinite(t) & np.isfinite(v)
    t, v = t[finite], v[finite]
    if t.size > 1 and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, v = t[order], v[order]
    return t, v


def ops_series(run: RunData) -> Series:
    """Cumulative operations over time: the run's own, else from records carrying ``ops``."""
    if len(run.ops) >= 2:
        return run.ops
    records = [*run.gc_events, *run.garbage_windows, *run.object_windows]
    points = sorted((float(r["t"]), float(r["ops"])) for r in records if "ops" in r)
    t = np.asarray([p[0] for p in points], dtype=np.float64)
    v = np.maximum.accumulate(np.asarray([p[1] for p in points], dtype=np.float64)) if points else t
    return Series(t, v, "ops")


def workload_end(run: RunData, ops: Series) -> float:
    """Seconds at which the workload stopped: the ``loop_end`` (or ``crash``) event.

    After it the worker takes its final garbage and objects windows and the
    malloc_trim probe, which move RSS by megabytes for the harness's reasons; a
    drop like that in the last samples turns a steady climb into a "sawtooth"
    and, on a short run, puts the interval's lower bound far below zero. Runs
    recorded without either event end at their last sample.
    """
    last = _last_time(run, ops)
    stops = [float(e["t"]) for e in run.events if e.get("name") in END_EVENTS]
    return min([last, *stops])


def _last_time(run: RunData, ops: Series) -> float:
    lasts = [float(np.max(s.t)) for s in (run.rss, run.uss, ops, *run.gauges.values()) if len(s)]
    lasts += [float(r["t"]) for r in run.gc_events[-1:]]  # written in time order
    finite = [x for x in lasts if math.isfinite(x)]
    return max(finite, default=0.0)
