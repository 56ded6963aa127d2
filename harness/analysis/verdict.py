"""Named verdict rules, each next to the ways it can be wrong.

A budget is judged on an estimate with its 95% interval (rates) or on the level
a gauge held (levels). Statuses, mildest first: ``pass``, ``suspicious``,
``error`` (could not judge), ``leak``. The run's verdict is the worst status,
unless the process itself ended badly (``crashed``, ``hung``, ``ceiling``,
``error``, decided by the runner): that overrides, and the data reasons stay.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.analysis.budgets import Budget
from harness.analysis.shapes import SUSTAIN, Level
from harness.analysis.units import format_duration, format_rate
from harness.verdicts import ENDING_VERDICTS

SEVERITY = {"pass": 0, "suspicious": 1, "error": 2, "leak": 3}
DETECTION_POINTS = 16  # prefixes tried for time to detect
DETECTION_FIRST = 1 / 64  # shortest prefix, as a fraction of the measured window


@dataclass(frozen=True)
class Judgement:
    """The outcome of one rule on one budget: status, rule name and a sentence."""

    status: str
    rule: str
    reason: str


@dataclass(frozen=True)
class Resolution:
    """The smallest growth a series can show for reasons other than a leak, and over how long.

    A byte series moves by one-off amounts (an arena or pool grown once, a
    sampler's window, a trim): growth under ``amount`` in ``span_s`` seconds
    cannot be told from one of those, whatever the interval says about the rate.
    """

    amount: float  # series unit
    span_s: float  # the window the judged slope was fitted on

    @property
    def per_h(self) -> float:
        """The slowest rate this window can resolve, per hour."""
        return self.amount / self.span_s * 3600.0 if self.span_s > 0 else math.inf

    def window_for(self, limit: float) -> float:
        """Seconds of data a rate of ``limit`` per hour needs to add up to ``amount``."""
        return self.amount / limit * 3600.0 if limit > 0 else math.inf


def judge_rate(
    label: str,
    estimate: float,
    ci: tuple[float, float] | None,
    budget: Budget,
    resolution: Resolution | None = None,
) -> Judgement:
    """Judge a growth or per-operation rate against ``budget`` (same unit as ``limit``).

    ``resolution`` (byte series): growth a window this short shows without a leak.
    """
    limit, unit = budget.limit, budget.unit
    shown = _shown(estimate, ci, unit)
    floor = max(limit, resolution.per_h if resolution is not None else limit)
    if ci is not None and ci[0] > floor:
        # Rule confirmed-growth. False positives: a wander slower than the run
        # looks like a trend (the interval's correlation correction only sees
        # wobbles shorter than a few blocks); a transient the warm-up cut
        # missed; and with a zero budget, 2.5% of runs that do not grow at all.
        # On a short window the lower bound must also add up to more than a
        # one-off move (rule below-resolution), which removes the second kind.
        return Judgement("leak", "confirmed-growth", f"{label} {shown} is above {budget.text!r}.")
    noisy = _too_noisy(ci, limit)
    if estimate > limit and resolution is not None and ci is not None and ci[1] <= resolution.per_h:
        return _below_resolution(label, shown, ci[1], budget, resolution)
    if estimate > limit:
        # Rule unconfirmed-growth. False positives by design: when the true
        # growth sits at the budget, half of all runs land here. It asks for a
        # longer run, it does not fail a build on its own.
        return Judgement(
            "suspicious", "unconfirmed-growth",
            f"{label} {shown} is above {budget.text!r} but the interval cannot confirm it{noisy}.",
        )
    # Rule within-budget. False negatives: a leak slower than the noise over a
    # short run; the "too noisy to judge" note says when that is possible.
    return Judgement("pass", "within-budget", f"{label} {shown} is within {budget.text!r}{noisy}.")


def _below_resolution(
    label: str, shown: str, high: float, budget: Budget, resolution: Resolution
) -> Judgement:
    """Rule below-resolution: even the interval's top adds up to less than a one-off move.

    The false positives it removes: a 20 s check of a healthy process whose RSS
    still climbs from warm-up (traffic histories filling, arenas and caches
    growing, the first objects window: up to 3.8 MB in 18 s, 50 to 200 MB/h
    "confirmed" on the window), which levels off within a minute and measures
    0 to 2 MB/h over 90 s. A pass here says "no growth this window can resolve",
    not "within the budget": its false negatives are leaks slower than
    ``resolution.per_h``, which only a window of ``window_for(limit)`` can see
    (nightly runs). Leaks of the incidents' size (3.7 and 12 GB/h, 18 to 60 MB
    in 18 s) stay far above it.
    """
    unit = budget.unit.split("/")[0]
    most = format_rate(high * resolution.span_s / 3600.0, unit)
    return Judgement(
        "pass", "below-resolution",
        f"{label} {shown} over {format_duration(resolution.span_s)} adds up to at most {most}, "
        f"under the {format_rate(resolution.amount, unit)} a one-off allocation can move it: "
        f"not enough data to confirm a rate of {budget.text!r} "
        f"(that needs about {format_duration(resolution.window_for(budget.limit))}).",
    )


def judge_level(label: str, held: Level, budget: Budget) -> Judgement:
    """Judge the highest value a gauge held against a ``<=`` budget."""
    peak = format_rate(held.peak, budget.unit)
    if held.sustained > budget.limit:
        sustained = format_rate(held.sustained, budget.unit)
        # Rule sustained-level. False positives: a legitimate burst longer than
        # SUSTAIN samples (a peer stalled for a second); give the limit headroom.
        return Judgement(
            "leak", "sustained-level",
            f"{label} held {sustained} for {SUSTAIN}+ samples, over {budget.text!r}.",
        )
    if held.peak > budget.limit and math.isnan(held.sustained):
        # Rule too-few-samples. Fewer than SUSTAIN samples so far: over the
        # limit, but whether it stays there is not known yet.
        return Judgement(
            "suspicious", "too-few-samples",
            f"{label} peaked at {peak} over {budget.text!r}; too few samples yet "
            f"(under {SUSTAIN}) to tell whether it stays there.",
        )
    if held.peak > budget.limit:
        # Rule spike-level. A single sample over the limit is what a sampler
        # reading mid-operation sees; worth a look, not a failure.
        return Judgement(
            "suspicious", "spike-level",
            f"{label} peaked at {peak} over {budget.text!r} but did not stay there.",
        )
    return Judgement("pass", "within-level", f"{label} peaked at {peak}, within {budget.text!r}.")


def no_data(label: str, why: str) -> Judgement:
    """A budget that could not be judged: never a silent pass."""
    # Rule no-data. A run too short or a sampler unavailable must not look
    # like a clean bill of health, so this is an error the user sees.
    return Judgement("error", "no-data", f"{label}: {why}")


def combine(
    judgements: Sequence[Judgement], outcome: str | None = None, outcome_reason: str | None = None
) -> tuple[str, list[str]]:
    """The run's verdict and its reasons, worst first."""
    ordered = sorted(judgements, key=lambda j: -SEVERITY[j.status])
    reasons = [j.reason for j in ordered]
    if outcome is not None:
        if outcome not in ENDING_VERDICTS:
            raise ValueError(f"process verdict {outcome!r} is not one of {ENDING_VERDICTS}.")
        return outcome, [outcome_reason or f"the worker process ended: {outcome}.", *reasons]
    verdict = ordered[0].status if ordered else "pass"
    return verdict, reasons


def worst(statuses: Sequence[str]) -> str:
    return max(statuses, key=lambda s: SEVERITY[s], default="pass")


def detection_grid(start_s: float, end_s: float) -> list[float]:
    """Prefix end times, geometric in elapsed time: dense early, where detection matters."""
    span = end_s - start_s
    if not span > 0:
        return [end_s]
    elapsed = np.geomspace(span * DETECTION_FIRST, span, DETECTION_POINTS)
    return [float(start_s + e) for e in elapsed]


def time_to_detect(
    ends: Sequence[float], status_at: Callable[[float], str], target: str
) -> float | None:
    """Earliest prefix end from which every longer prefix gave ``target`` too.

    Walks back from the longest prefix and stops at the first that disagrees,
    so a late detection costs few evaluations. "Stayed" rather than "first":
    a prefix that flagged by chance and then un-flagged had not detected anything.
    """
    found: float | None = None
    for end in sorted(ends, reverse=True):
        if status_at(end) != target:
            break
        found = end
    return found


def _too_noisy(ci: tuple[float, float] | None, limit: float) -> str:
    if ci is None:
        return " (no interval: too few blocks to judge)"
    lo, hi = ci
    if lo <= limit <= hi and hi - lo > abs(limit):
        return "; too noisy to judge: the 95% interval is wider than the budget, run longer"
    return ""


def _shown(estimate: float, ci: tuple[float, float] | None, unit: str) -> str:
    text = format_rate(estimate, unit)
    if ci is None or not all(math.isfinite(x) for x in ci):
        return text
    return f"{text} (95% CI {format_rate(ci[0], unit)} to {format_rate(ci[1], unit)})"
