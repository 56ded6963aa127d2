"""Nightly regression flags: a scenario's latest growth against its own run-to-run noise.

Rule ``outside-noise-band``. For each scenario's fixed-code series, the band
is ``median ± max(k · 1.4826 · MAD, floor)`` of the previous runs' growth per
hour (up to ``nights - 1`` of them, at least ``min_history``). The latest run
is flagged ``up`` when its estimate is above the band *and* its own 95%
interval lies above the median (one run whose interval is wide enough to
hold the usual value is not evidence of a change); ``down`` symmetrically.

Why median and MAD: one bad night (a noisy neighbour on the CI machine) must
not widen the band for two weeks, as it would a mean and standard deviation.
Why a floor: a steady scenario grows by about nothing every night, its MAD is
near zero, and a band of zero width flags the smallest wobble. The floor
(default 10 MB/h) is the growth a short nightly run cannot resolve anyway.

False positives: a deliberate change that makes a scenario grow more (a
bigger warm-up than declared, a larger cache cap) flags once, then becomes
the new normal as it fills the history; a change of CI machine, kernel or
allocator shifts every scenario at once (all flagged on one night is a hint);
with the minimum of 5 previous runs the MAD is itself noisy, which is what
``k = 4`` pays for. False negatives: a slow creep (each night a little
higher) drags the median along; a jump under the floor; a scenario with fewer
than ``min_history`` previous runs is never flagged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from harness.history.db import Point, Trend, trends

K = 4.0
FLOOR_PER_H = 10e6  # bytes per hour
MIN_HISTORY = 5
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Band:
    """Where a series' growth usually is: ``centre ± half``, bytes per hour."""

    centre: float
    half: float

    @property
    def low(self) -> float:
        return self.centre - self.half

    @property
    def high(self) -> float:
        return self.centre + self.half


@dataclass(frozen=True)
class Flag:
    """A latest run outside its band; its sentence is the reports' (``reports.history``)."""

    scenario: str
    column: str
    direction: str  # "up": grows more than usual (a regression); "down": less
    latest: Point
    band: Band
    history: int  # previous runs the band came from


def noise_band(values: list[float], k: float = K, floor: float = FLOOR_PER_H) -> Band:
    """``median ± max(k · robust sd, floor)`` of ``values`` (see the module docstring)."""
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values)
    return Band(centre, max(k * MAD_TO_SD * mad, floor))


def check_latest(
    trend: Trend, k: float = K, floor: float = FLOOR_PER_H, min_history: int = MIN_HISTORY
) -> Flag | None:
    """The flag for ``trend``'s latest run, or None when it sits inside its band."""
    measured = [p for p in trend.points if p.growth_per_h is not None]
    if len(measured) < min_history + 1:
        return None
    *previous, latest = measured
    band = noise_band([p.growth_per_h for p in previous if p.growth_per_h is not None], k, floor)
    value = latest.growth_per_h
    assert value is not None
    low, high = latest.growth_ci or (value, value)
    if value > band.high and low > band.centre:
        return Flag(trend.scenario, trend.column, "up", latest, band, len(previous))
    if value < band.low and high < band.centre:
        return Flag(trend.scenario, trend.column, "down", latest, band, len(previous))
    return None


def flag_regressions(
    db: Path,
    scenario: str | None = None,
    nights: int = 14,
    k: float = K,
    floor: float = FLOOR_PER_H,
    min_history: int = MIN_HISTORY,
) -> list[Flag]:
    """Flags for the fixed-code series of every scenario (or one), latest run each.

    Injected series are left out: their growth is a broken cache's, expected
    to be large and to vary; the detection matrix judges those.
    """
    found = []
    for trend in trends(db, scenario, nights):
        if trend.injected:
            continue
        flag = check_latest(trend, k, floor, min_history)
        if flag is not None:
            found.append(flag)
    return found


def regressions(db: Path, scenario: str | None = None, nights: int = 14) -> list[Flag]:
    """The flags that fail a suite: fixed-code series growing more than usual."""
    return [f for f in flag_regressions(db, scenario, nights) if f.direction == "up"]
