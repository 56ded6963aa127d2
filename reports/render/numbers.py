"""Numbers for people: one display unit per row or axis, chosen from the data's size.

The analysis formatters (``harness.units``) pick a prefix per number;
a table row or an axis needs one prefix for the value and both ends of its
interval ("+3.7 GB/h [3.5, 3.9]"), so the pieces here choose it once.
Units follow the summary's: ``B``, ``B/h`` (bytes, decimal prefixes as in
budgets), ``/h``, ``/kop``, ``/min``, ``s/min``, ``ops/s`` or empty (a count).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.units import format_duration

_BYTE_PREFIXES = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3))
# Axis time units by the run's span: a 40 s run in hours reads as "0.01".
_TIME_UNITS = ((3 * 3600.0, 3600.0, "hours"), (180.0, 60.0, "minutes"), (0.0, 1.0, "seconds"))


def sig(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, fixed-point; ``–`` for None or NaN."""
    if value is None or not math.isfinite(value):
        return "–"
    if value == 0:
        return "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def display_unit(unit: str, magnitude: float) -> tuple[float, str]:
    """Divisor and display unit for values of this ``magnitude`` in ``unit``.

    Byte units get a decimal prefix (``B/h`` at 3.7e9 -> ``(1e9, "GB/h")``);
    other units are shown as they are.
    """
    if unit != "B" and not unit.startswith("B/"):
        return 1.0, unit
    for prefix, scale in _BYTE_PREFIXES:
        if abs(magnitude) >= scale:
            return scale, prefix + unit[1:]
    return 1.0, unit


def value_cells(
    value: float | None, ci: Sequence[float | None] | None, unit: str
) -> tuple[str, str, str]:
    """Value, display unit and ``[lo, hi]`` interval texts sharing one prefix."""
    numbers = [x for x in (value, *(ci or ())) if x is not None and math.isfinite(x)]
    scale, shown = display_unit(unit, max((abs(x) for x in numbers), default=0.0))
    value_text = sig(None if value is None else value / scale)
    if not ci or len(ci) != 2:
        return value_text, shown, ""
    lo, hi = (None if x is None else x / scale for x in ci)
    return value_text, shown, f"[{sig(lo)}, {sig(hi)}]"


def format_growth(per_h: float, ci: Sequence[float] | None, unit: str) -> str:
    """``"+3.7 GB/h [3.5, 3.9]"``: signed estimate, unit, and the 95% interval."""
    value, shown, interval = value_cells(per_h, ci, unit)
    sign = "+" if per_h > 0 else ""
    return f"{sign}{value} {shown} {interval}".strip()


def time_unit(span_s: float) -> tuple[float, str]:
    """Divisor and name of the time unit an axis over ``span_s`` seconds reads best in."""
    for threshold, divisor, name in _TIME_UNITS:
        if span_s >= threshold:
            return divisor, name
    return 1.0, "seconds"


def format_seconds(seconds: float | None) -> str:
    """``"1h30m"``, ``"12s"``; ``–`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    return format_duration(seconds)


def slug(text: str) -> str:
    """A file-name-safe form of a scenario name (``module:ATTR`` included)."""
    kept = "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
    return kept.strip("-.") or "run"
