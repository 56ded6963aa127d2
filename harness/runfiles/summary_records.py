"""The typed records ``summary.json`` is made of, each with ``to_json`` / ``from_json``.

The analysis builds them, the summary stores them, and every reader (reports,
history, compare, the suite, ``--json``) gets them back typed: a renamed field
is a type error here, not a silent ``None`` three packages away. ``to_json``
writes strict JSON (a non-finite number becomes null); ``from_json`` reads
what ``to_json`` wrote (null back to NaN where a number is required) and
raises ``KeyError``, ``TypeError`` or ``ValueError`` on anything else, which
:func:`harness.runfiles.summary.load_summary` turns into one sentence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast, get_args

from harness.basis import Basis

JSON = dict[str, object]
BASES = get_args(Basis)


@dataclass(frozen=True)
class Metric:
    """One number with its unit, optional 95% interval, budget and budget status."""

    value: float
    unit: str
    ci: tuple[float, float] | None = None
    budget: str | None = None
    status: str | None = None
    note: str | None = None

    def to_json(self) -> JSON:
        data: JSON = {"value": finite(self.value), "unit": self.unit}
        if self.ci is not None:
            data["ci"] = [finite(self.ci[0]), finite(self.ci[1])]
        for key in ("budget", "status", "note"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Metric:
        return cls(number(data.get("value")), text(data.get("unit", "")), interval(data.get("ci")),
                   optional_text(data.get("budget")), optional_text(data.get("status")),
                   optional_text(data.get("note")))

    def judged(self, budget: str, status: str) -> Metric:
        return replace(self, budget=budget, status=status)


@dataclass(frozen=True)
class FittedLine:
    """The straight line a series was judged on, over ``[start_s, end_s]``, with its
    slope's 95% interval (see :mod:`harness.analysis.fitline`)."""

    basis: Basis
    start_s: float  # where the judged samples begin (s since start)
    end_s: float  # last sample analysed (s since start)
    analysed_from_s: float  # first sample analysed, after any automatic warm-up cut
    mid_value: float  # the line's value at (start_s + end_s) / 2, series unit
    per_h: float  # series unit per hour
    ci: tuple[float, float]  # series unit per hour
    unit: str  # the series' unit (B for rss and uss)

    def to_json(self) -> JSON:
        return {
            "basis": self.basis, "start_s": self.start_s, "end_s": self.end_s,
            "analysed_from_s": self.analysed_from_s, "mid_value": finite(self.mid_value),
            "value_unit": self.unit, "per_h": finite(self.per_h),
            "ci": [finite(self.ci[0]), finite(self.ci[1])], "unit": f"{self.unit}/h",
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> FittedLine:
        ci = interval(data.get("ci")) or (math.nan, math.nan)
        return cls(basis_of(data["basis"]), number(data["start_s"]), number(data["end_s"]),
                   number(data.get("analysed_from_s", data["start_s"])),
                   number(data.get("mid_value")), number(data.get("per_h")), ci,
                   text(data.get("value_unit", "")))


@dataclass(frozen=True)
class SeriesDetail:
    """One series as judged: its window, basis, shapes, line, and what the allocation
    windows left behind that the analysis took off later samples."""

    start_s: float
    end_s: float
    samples: int
    basis: str
    plateau: bool
    sped_up: bool
    drops: int
    step: tuple[float, float] | None  # (at_s, height)
    fit: FittedLine
    taken_off: tuple[tuple[float, float], ...] | None = None  # (window end s, amount)

    def to_json(self) -> JSON:
        data: JSON = {
            "start_s": self.start_s, "end_s": self.end_s, "samples": self.samples,
            "basis": self.basis, "plateau": self.plateau, "sped_up": self.sped_up,
            "drops": self.drops, "fit": self.fit.to_json(),
            "step": {"at_s": self.step[0], "height": self.step[1]} if self.step else None,
        }
        if self.taken_off is not None:
            data["taken_off"] = [list(pair) for pair in self.taken_off]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SeriesDetail:
        step = data.get("step")
        taken = data.get("taken_off")
        return cls(
            number(data["start_s"]), number(data["end_s"]), integer(data.get("samples", 0)),
            text(data.get("basis", "all")), bool(data.get("plateau")), bool(data.get("sped_up")),
            integer(data.get("drops", 0)),
            (number(step["at_s"]), number(step["height"])) if isinstance(step, Mapping) else None,
            FittedLine.from_json(mapping(data["fit"])),
            tuple(pair(p) for p in sequence(taken)) if taken is not None
            else None,
        )


@dataclass(frozen=True)
class BudgetJudgement:
    """One budget as the analysis judged it: its text, status, rule and reason."""

    text: str
    status: str
    rule: str
    reason: str

    def to_json(self) -> JSON:
        return {"text": self.text, "status": self.status, "rule": self.rule,
                "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> BudgetJudgement:
        return cls(text(data["text"]), text(data.get("status", "")), text(data.get("rule", "")),
                   text(data.get("reason", "")))


@dataclass(frozen=True)
class Limit:
    """A budget parsed (:class:`harness.budgets.Budget`), so readers draw its limit without
    parsing its text: ``kind`` rate or level, ``limit`` in ``unit``."""

    text: str
    metric: str
    kind: str
    limit: float
    unit: str

    def to_json(self) -> JSON:
        return {"text": self.text, "metric": self.metric, "kind": self.kind,
                "limit": self.limit, "unit": self.unit}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Limit:
        return cls(text(data["text"]), text(data["metric"]), text(data["kind"]),
                   number(data["limit"]), text(data.get("unit", "")))


@dataclass(frozen=True)
class GarbageRow:
    """Cyclic garbage of one type after the warm-up: objects, bytes and objects per kop."""

    type: str
    objects: int
    bytes: int
    per_kop: float | None

    def to_json(self) -> JSON:
        return {"type": self.type, "objects": self.objects, "bytes": self.bytes,
                "per_kop": self.per_kop}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GarbageRow:
        return cls(text(data["type"]), integer(data.get("objects", 0)),
                   integer(data.get("bytes", 0)), optional_number(data.get("per_kop")))


@dataclass(frozen=True)
class GrowthRow:
    """Live objects of one type: the change between the first and last window it is in."""

    type: str
    first: int
    last: int
    delta: int
    per_h: float
    per_kop: float | None

    def to_json(self) -> JSON:
        return {"type": self.type, "first": self.first, "last": self.last, "delta": self.delta,
                "per_h": finite(self.per_h), "per_kop": self.per_kop}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GrowthRow:
        return cls(text(data["type"]), integer(data.get("first", 0)), integer(data.get("last", 0)),
                   integer(data.get("delta", 0)), number(data.get("per_h")),
                   optional_number(data.get("per_kop")))


@dataclass(frozen=True)
class CycleRow:
    """A reference-cycle shape the garbage windows explained, aggregated over the run."""

    shape: tuple[str, ...]
    count: int
    retained_bytes: int
    types: tuple[str, ...]

    @property
    def path(self) -> str:
        """``A.x -> B.y -> (back)``."""
        return " -> ".join([*self.shape, "(back)"])

    def to_json(self) -> JSON:
        return {"shape": list(self.shape), "count": self.count,
                "retained_bytes": self.retained_bytes, "types": list(self.types)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CycleRow:
        return cls(tuple(map(text, sequence(data["shape"]))), integer(data.get("count", 0)),
                   integer(data.get("retained_bytes", 0)),
                   tuple(map(text, sequence(data.get("types", [])))))


@dataclass(frozen=True)
class Finding:
    """One line of "Where it grows"."""

    kind: str  # python, native, cycles, owner, tensors, level, ...
    signal: str  # what saw it: tracemalloc, heap, cyclic_garbage, objects, a gauge
    text: str  # the sentence people read
    site: str | None = None
    stack: tuple[str, ...] = ()
    owner: str | None = None
    per_h: float | None = None  # in ``unit`` per hour, when a rate is known
    unit: str = ""

    def to_json(self) -> JSON:
        return {"kind": self.kind, "signal": self.signal, "text": self.text, "site": self.site,
                "stack": list(self.stack), "owner": self.owner, "per_h": self.per_h,
                "unit": self.unit}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Finding:
        return cls(text(data.get("kind", "")), text(data.get("signal", "")), text(data["text"]),
                   optional_text(data.get("site")), tuple(map(text, sequence(data.get("stack", []))
                                                              or ())),
                   optional_text(data.get("owner")), optional_number(data.get("per_h")),
                   text(data.get("unit", "")))


# JSON readers: the type each field must have, or the error load_summary reports.

def basis_of(value: object) -> Basis:
    if value not in BASES:
        raise ValueError(f"unknown basis {value!r}")
    return cast(Basis, value)


def finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def number(value: object) -> float:
    """A JSON number; null is NaN (how ``to_json`` wrote a non-finite one)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def optional_number(value: object) -> float | None:
    return None if value is None else number(value)


def integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def optional_text(value: object) -> str | None:
    return None if value is None else text(value)


def mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {value!r}")
    return value


def sequence(value: object) -> Sequence[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def pair(value: object) -> tuple[float, float]:
    first, second = sequence(value)
    return number(first), number(second)


def interval(value: object) -> tuple[float, float] | None:
    """A 95% interval ``[low, high]``, or None when absent."""
    return pair(value) if value is not None else None
