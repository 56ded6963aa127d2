"""Human strings for durations and sizes, both ways.

Parsing is strict on purpose: a budget or a ceiling that is silently read wrong
(``"50 mb"`` as millibits, ``"10"`` as ten hours) is worse than an error, so every
malformed input gets a ``ValueError`` whose message is a sentence for the user.

Sizes without an ``i`` are decimal (``MB`` = 10**6 bytes, like the units psutil
users quote in incident reports); ``KiB``/``MiB``/``GiB`` are binary.
"""

from __future__ import annotations

import math
import re

_DURATION_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*(ms|d|h|m|s)", re.IGNORECASE)

_SIZE_UNITS = {
    "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6,
    "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"\s*([+-]?(?:\d+(?:\.\d+)?|\.\d+))\s*([a-z]*)\s*", re.IGNORECASE)

# Decimal prefixes for display: budgets are written in MB/h, so show MB/h back.
_DISPLAY_PREFIXES = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3))


def parse_duration(text: str) -> float:
    """Seconds in ``"90s"``, ``"10m"``, ``"2h"``, ``"1h30m"``, ``"250ms"``, ``"1.5d"``.

    Parts must come largest unit first, each unit at most once; a bare number
    is refused because ``"10"`` could mean seconds or minutes.
    """
    source = text.strip()
    if not source:
        raise ValueError("empty duration: write it like '90s', '10m', '2h' or '1h30m'.")
    if _is_number(source):
        if not float(source) > 0:  # suggesting '0s' would only earn the next refusal
            raise ValueError(f"a duration must be positive, got {text!r}.")
        raise ValueError(f"duration {text!r} has no unit: write '{source}s' or '{source}m'.")
    total, position, last_rank = 0.0, 0, -1
    ranks = list(_DURATION_UNITS)
    for match in _DURATION_PART.finditer(source):
        if source[position : match.start()].strip():
            break
        unit = match.group(2).lower()
        rank = ranks.index(unit)
        if rank <= last_rank:
            raise ValueError(
                f"duration {text!r}: write units largest first, each once (like '1h30m')."
            )
        total += float(match.group(1)) * _DURATION_UNITS[unit]
        position, last_rank = match.end(), rank
    if last_rank < 0 or source[position:].strip():
        raise ValueError(
            f"cannot read duration {text!r}: use a number and a unit among "
            "ms, s, m, h, d (like '90s', '10m', '1h30m')."
        )
    return total


def parse_size(text: str) -> int:
    """Bytes in ``"2GiB"``, ``"500MB"``, ``"1.5G"``, ``"4096"`` (bare numbers are bytes)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(
            f"cannot read size {text!r}: use a number and a unit among "
            "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (like '500MB' or '2GiB')."
        )
    number, unit = float(match.group(1)), match.group(2).lower() or "b"
    if unit not in _SIZE_UNITS:
        raise ValueError(
            f"size {text!r}: unknown unit {match.group(2)!r}; "
            "use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB."
        )
    if number < 0:
        raise ValueError(f"size {text!r} is negative; sizes count bytes.")
    return round(number * _SIZE_UNITS[unit])


def format_bytes(value: float, digits: int = 3) -> str:
    """``1.23 GB``, ``-45.6 MB``, ``512 B``: decimal units, ``digits`` significant digits."""
    if not math.isfinite(value):
        return f"{value} B"
    # Round first: 999.95 MB must show as "1 GB", not "1000 MB".
    value = float(f"{value:.{digits}g}")
    for prefix, scale in _DISPLAY_PREFIXES:
        if abs(value) >= scale:
            return f"{_significant(value / scale, digits)} {prefix}"
    return f"{_significant(value, digits)} B"


def format_rate(value: float, unit: str, digits: int = 3) -> str:
    """A rate with its unit: ``format_rate(3.7e9, "B/h") == "3.7 GB/h"``; ``"0.5 /kop"``.

    Units starting with ``B`` are byte rates and get a decimal prefix; any other
    unit is printed as given after the number, grouped by thousands
    (``"352,000,000 /h"``).
    """
    if unit == "B" or unit.startswith("B/"):
        return format_bytes(value, digits) + unit[1:]
    return f"{grouped(_significant(value, digits))} {unit}".rstrip()


def grouped(number: str) -> str:
    """``"352000000"`` as ``"352,000,000"``: thousands separators in the whole part, as
    the reports' tables print counts."""
    sign, digits = ("-", number[1:]) if number.startswith("-") else ("", number)
    whole, dot, fraction = digits.partition(".")
    if not whole.isdigit():
        return number
    return f"{sign}{int(whole):,}{dot}{fraction}"


def format_duration(seconds: float) -> str:
    """``"1h30m"``, ``"45s"``, ``"250ms"``: the form :func:`parse_duration` reads back."""
    if not math.isfinite(seconds):
        return str(seconds)
    if abs(seconds) < 1:
        return f"{_significant(seconds * 1000, 3)}ms"
    if abs(seconds) < 60:
        return f"{_significant(seconds, 3)}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{amount}{unit}" for amount, unit in parts if amount) or "0s"


def _significant(value: float, digits: int) -> str:
    # Fixed-point, never exponent form: parse_size and people both read it back.
    rounded = float(f"{value:.{digits}g}")
    if rounded == 0:
        return "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(rounded))), 0)
    text = f"{rounded:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if decimals else text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
