"""Growth per hour of one series, with the shapes that are not leaks set apart.

:func:`growth` cuts the warm-up, fits a robust slope with an honest interval
(:mod:`harness.analysis.slope`), and looks for the shapes whose overall slope
misleads (:mod:`harness.analysis.shapes`). It then names the slope a verdict
should be judged on (``Trend.basis``):

- ``floor``: a sawtooth. Memory the collector gives back at every gen-2 is not
  lost; what the floor under the teeth gains is. The teeth are reported as
  ``reclaimable`` (and cyclic garbage has its own budget).
- ``after_step``: one jump, then the slope after it. A pool grown once is a
  one-off cost, not a rate; a level budget is the tool for one-off costs.
- ``tail``: the slope changed; judge where the series is now, the last third.
  Either a plateau (it grew, then the last third grew at most half as fast
  with confidence: a cache reaching its cap) or a late start (the last third
  confirms more growth than the whole window, with a narrower interval from a
  third of the data: a leak that began mid-run, where one line through
  flat-then-rising data fits so badly that its interval is useless), whose
  lower bound must also beat the first third's slope (a level wandering slower
  than a third climbs with confidence somewhere). Switching
  never weakens a verdict: estimate and lower bound are both higher. A steady
  series almost never switches (a third of the data gives an interval about 5x
  wider, not narrower); on noise the last third must still beat the budget with
  its own lower bound, so the false-leak chance at most doubles (two looks).
- ``all``: none of these; the slope over the whole measured window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.shapes import (
    Step,
    find_sawtooth,
    find_step,
    reclaimable,
    warmup_end,
)
from harness.analysis.slope import Slope, residuals, robust_spread, sen_slope
from harness.basis import Basis
from harness.runfiles.rundata import FloatArray, clean

MIN_SAMPLES = 8
TAIL_FRACTION = 1 / 3
PLATEAU_RATIO = 0.5  # the tail must be confidently under half the overall slope
RISE_SPREADS = 4.0  # and the series must have risen by 4 sd of the tail's wobble


@dataclass(frozen=True)
class Trend:
    """Everything :func:`growth` found; slopes are per hour in the series' unit."""

    start_s: float  # first sample analysed (after warm-up)
    end_s: float
    n: int  # raw samples analysed
    overall: Slope
    tail: Slope | None  # slope of the last third
    plateau: bool  # grew, then the last third levelled off
    sped_up: bool  # the last third confirms more growth than the whole (a late start)
    floor: Slope | None  # post-collection floor, when a sawtooth was found
    drops: int
    reclaimable: float  # mean height above the floor (series unit), 0 without sawtooth
    step: Step | None
    after_step: Slope | None
    spread: float  # robust sd of the samples around the overall line (series unit)
    basis: Basis

    @property
    def judged(self) -> Slope:
        """The slope a budget is compared with (see the module docstring)."""
        chosen = {"floor": self.floor, "after_step": self.after_step, "tail": self.tail}
        return chosen.get(self.basis) or self.overall

    @property
    def duration_h(self) -> float:
        return (self.end_s - self.start_s) / 3600.0

    @property
    def noise(self) -> float | None:
        """Spread relative to the growth over the window; None when nothing grew.

        Above ~1 the wobble is as large as the whole growth: that the slope is
        not zero may still be certain, its size much less so.
        """
        grown = abs(self.overall.per_h) * self.duration_h
        return self.spread / grown if grown > 0 else None


def growth(
    t: FloatArray, v: FloatArray, warmup_s: float | None = None, auto_warmup: bool = True
) -> Trend | None:
    """Analyse ``v`` (any unit) over ``t`` (seconds); None if under ``MIN_SAMPLES`` remain.

    ``warmup_s`` is a lower bound: samples before it are dropped, then (with
    ``auto_warmup``) a remaining transient is cut too: at most a third of what
    is left, never below ``MIN_SAMPLES``, and never a start that grew at the
    rate the rest goes on growing at (see :func:`auto_warmup_start`).
    """
    t, v = clean(t, v)
    if warmup_s is not None:
        t, v = t[t >= warmup_s], v[t >= warmup_s]
    if auto_warmup and t.size >= MIN_SAMPLES:
        start = auto_warmup_start(t, v)
        t, v = t[t >= start], v[t >= start]
    if t.size < MIN_SAMPLES:
        return None
    overall = sen_slope(t, v)
    if overall is None:
        return None
    return _shapes(t, v, overall)


def auto_warmup_start(t: FloatArray, v: FloatArray) -> float:
    """Where the measured window starts once a transient at its start is cut.

    A cut is kept only if the part it removes grew at a rate the rest's 95%
    interval excludes: a transient settles (RSS jumping as pools and arenas
    are first touched), a leak goes on. Without this, a ramp that starts at
    t=0 and never stops lost up to half its window to "warm-up" (seen: 24.7 s
    of a 60 s run), and with it the evidence.
    """
    # Never cut a window into one too short to judge: 3 s runs with a 2 s
    # warm-up had 10 samples, the cut took 5, and RSS went unjudged.
    start = min(warmup_end(t, v), float(t[-MIN_SAMPLES]))
    return float(t[0]) if continues(t, v, start) else start


def continues(t: FloatArray, v: FloatArray, start: float) -> bool:
    """Whether the samples before ``start`` grew at the rate of those after it."""
    before, after = t < start, t >= start
    if np.count_nonzero(before) >= 2 and np.ptp(v[before]) == 0:
        # Flat: its fitted slope is rounding (seen: 1e-12 /h, "outside" a [0, 0] interval).
        rest = sen_slope(t[after], v[after])
        return rest is not None and rest.ci[0] <= 0.0 <= rest.ci[1]
    if np.count_nonzero(before) < MIN_SAMPLES:
        # Too few to fit: compare the straight line through them instead.
        if np.count_nonzero(before) < 2:
            return False
        early = float(np.polyfit(t[before], v[before], 1)[0]) * 3600.0
    else:
        fitted = sen_slope(t[before], v[before])
        if fitted is None:
            return False
        early = fitted.per_h
    rest = sen_slope(t[after], v[after])
    return rest is not None and rest.ci[0] <= early <= rest.ci[1]


def _shapes(t: FloatArray, v: FloatArray, overall: Slope) -> Trend:
    tail = _tail_slope(t, v)
    plateau = tail is not None and _levelled_off(t, v, overall, tail)
    sped_up = tail is not None and _started_late(overall, tail) and _new_rise(t, v, tail)
    saw = find_sawtooth(t, v, overall.per_h)
    floor = sen_slope(saw.floor_t, saw.floor_v) if saw is not None else None
    step = find_step(t, v) if saw is None else None
    after_step = _after(t, v, step.at_s) if step is not None else None
    basis: Basis = "all"
    if floor is not None:
        basis = "floor"
    elif after_step is not None:
        basis = "after_step"
    elif plateau or sped_up:
        basis = "tail"
    return Trend(
        start_s=float(t[0]),
        end_s=float(t[-1]),
        n=int(t.size),
        overall=overall,
        tail=tail,
        plateau=plateau,
        sped_up=sped_up,
        floor=floor,
        drops=saw.drops if saw is not None else 0,
        reclaimable=reclaimable(t, v, saw) if saw is not None else 0.0,
        step=step,
        after_step=after_step,
        spread=robust_spread(residuals(t, v, overall.per_h)),
        basis=basis,
    )


def _levelled_off(t: FloatArray, v: FloatArray, overall: Slope, tail: Slope) -> bool:
    """The last third confidently under half the overall slope, after a clear rise.

    The rise is measured as levels (last third minus first third, against the
    tail's own spread), not as a slope: a bend makes residuals around one line
    look correlated, which rightly widens the interval of any single slope.
    """
    if not overall.per_h > 0 or not tail.ci[1] < PLATEAU_RATIO * overall.per_h:
        return False
    third = TAIL_FRACTION * (t[-1] - t[0])
    late = t >= t[-1] - third
    rise = np.median(v[late]) - np.median(v[t <= t[0] + third])
    return bool(rise > RISE_SPREADS * robust_spread(residuals(t[late], v[late], tail.per_h)))


def _started_late(overall: Slope, tail: Slope) -> bool:
    """The last third confirms more growth than the whole, and more precisely."""
    narrower = tail.ci[1] - tail.ci[0] < overall.ci[1] - overall.ci[0]
    return narrower and tail.ci[0] > max(overall.ci[0], 0.0) and tail.per_h > overall.per_h


def _new_rise(t: FloatArray, v: FloatArray, tail: Slope) -> bool:
    """The last third confirms a rate above the one the first third grew at.

    A late start is growth the series did not show before. The tail's interval
    knows only the tail's own noise: a level that wanders over longer times than
    a third (a queue of requests filling and draining, a tree splitting and
    merging) climbs with confidence in some stretch, and a last third that
    allocation windows cut to 3 s of samples judged such a climb: seen on SGLang's
    unified-hicache-exits, +2.6M blocks/h in the tail after the first third rose
    faster, a ``leak``. The first third stands for "before" (the same length, the
    same estimator): a leak that started inside it is steep over the whole window
    anyway. Too few samples there to fit keeps the rule as it was.
    """
    early = t <= t[0] + TAIL_FRACTION * (t[-1] - t[0])
    if np.count_nonzero(early) < MIN_SAMPLES:
        return True
    before = sen_slope(t[early], v[early])
    return before is None or tail.ci[0] > before.per_h


def _tail_slope(t: FloatArray, v: FloatArray) -> Slope | None:
    cut = t[-1] - TAIL_FRACTION * (t[-1] - t[0])
    return _after(t, v, cut)


def _after(t: FloatArray, v: FloatArray, start_s: float) -> Slope | None:
    keep = t >= start_s
    if np.count_nonzero(keep) < MIN_SAMPLES:
        return None
    return sen_slope(t[keep], v[keep])
