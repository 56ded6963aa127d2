"""Budgets: the human strings a scenario declares and the CLI/pytest override.

Three forms, all ``"<metric>: <limit>"``:

- growth per time: ``"rss: 50 MB/h"`` (a bytes series), ``"detached_nodes: 100 /h"``
  (a count gauge). Any of ``/s``, ``/min``, ``/h``, ``/d``; stored per hour.
- amount per work: ``"cyclic_garbage: 0.5 /kop"`` (objects per 1000 operations).
  Any of ``/op``, ``/kop``, ``/Mop``; stored per 1000 operations.
- level: ``"work_list: <= 4"`` or ``"rss: <= 2 GiB"``: the highest value held
  after warm-up must stay at or under the limit.

Which metric names exist is decided by :mod:`harness.analysis.summary`, which
sees the data; this module only reads the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from harness.units import format_rate, parse_size

BudgetKind = Literal["rate", "level"]

_PER_TIME = {"s": 3600.0, "sec": 3600.0, "min": 60.0, "h": 1.0, "hour": 1.0, "d": 1 / 24}
_PER_WORK = {"op": 1000.0, "kop": 1.0, "mop": 0.001}
_METRIC = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_AMOUNT = re.compile(r"([+-]?(?:\d+(?:\.\d+)?|\.\d+)(?:e[+-]?\d+)?)\s*([A-Za-z]*)\s*", re.I)

EXAMPLES = "'rss: 50 MB/h', 'detached_nodes: 100 /h', 'cyclic_garbage: 0.5 /kop', 'work_list: <= 4'"


@dataclass(frozen=True)
class Budget:
    """One parsed budget.

    ``limit`` is in the canonical ``unit``: ``B/h`` or ``/h`` (rates per hour),
    ``B/kop`` or ``/kop`` (per 1000 operations), ``B`` or ``""`` (levels).
    """

    metric: str
    kind: BudgetKind
    limit: float
    unit: str
    text: str

    @property
    def per(self) -> str:
        """``"h"`` for growth per hour, ``"kop"`` per 1000 operations, ``""`` for a level."""
        return self.unit.partition("/")[2]

    @property
    def is_bytes(self) -> bool:
        return self.unit.startswith("B")

    def describe(self) -> str:
        """The limit in display units, e.g. ``"50 MB/h"`` or ``"<= 4"``."""
        shown = format_rate(self.limit, self.unit)
        return f"<= {shown}" if self.kind == "level" else shown


def parse_budget(text: str, metric: str | None = None) -> Budget:
    """Read ``"metric: limit"``; ``metric=`` supplies the name for a bare limit.

    The keyword form serves ``@pytest.mark.leak(rss="50 MB/h")``-style callers.
    Raises ``ValueError`` with a sentence naming what is wrong.
    """
    name, sep, limit_text = text.partition(":")
    if not sep:
        if metric is None:
            raise ValueError(f"budget {text!r} names no metric: write it like {EXAMPLES}.")
        name, limit_text = metric, text
    name = name.strip()
    if not _METRIC.fullmatch(name):
        raise ValueError(
            f"budget {text!r}: {name!r} is not a metric name (letters, digits, '_', '.')."
        )
    limit_text = limit_text.strip()
    if not limit_text:
        raise ValueError(f"budget {text!r} has no limit after the metric name.")
    if limit_text.startswith("<="):
        limit, unit = _parse_level(limit_text[2:].strip(), text)
        return Budget(name, "level", limit, unit, text.strip())
    limit, unit = _parse_rate(limit_text, text)
    return Budget(name, "rate", limit, unit, text.strip())


def _parse_level(amount: str, text: str) -> tuple[float, str]:
    match = _AMOUNT.fullmatch(amount)
    if match is None:
        raise ValueError(f"budget {text!r}: a level is '<= N' or '<= SIZE' (like '<= 2 GiB').")
    number, unit = float(match.group(1)), match.group(2)
    _check_limit(number, text)
    if not unit:
        return number, ""
    try:
        return float(parse_size(amount)), "B"
    except ValueError as exc:
        raise ValueError(f"budget {text!r}: {exc}") from None


def _parse_rate(limit_text: str, text: str) -> tuple[float, str]:
    amount, slash, per = limit_text.rpartition("/")
    if not slash:
        raise ValueError(
            f"budget {text!r}: a rate needs a denominator like '/h' or '/kop', "
            "and a level is written '<= N'."
        )
    per = per.strip().lower()
    if per in _PER_TIME:
        factor, canonical = _PER_TIME[per], "h"
    elif per in _PER_WORK:
        factor, canonical = _PER_WORK[per], "kop"
    else:
        raise ValueError(
            f"budget {text!r}: unknown denominator '/{per}'; "
            "use /s, /min, /h, /d (time) or /op, /kop, /Mop (work)."
        )
    number, is_bytes = _rate_numerator(amount.strip(), text)
    _check_limit(number, text)
    return number * factor, ("B/" if is_bytes else "/") + canonical


def _rate_numerator(amount: str, text: str) -> tuple[float, bool]:
    match = _AMOUNT.fullmatch(amount)
    if match is None:
        raise ValueError(f"budget {text!r}: {amount!r} is not a number with an optional size unit.")
    if not match.group(2):
        return float(match.group(1)), False
    try:
        return float(parse_size(amount)), True
    except ValueError as exc:
        raise ValueError(f"budget {text!r}: {exc}") from None


def _check_limit(number: float, text: str) -> None:
    if number < 0:
        raise ValueError(f"budget {text!r}: a limit cannot be negative.")
