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

from harness.analysis.shapes import Level
from harness.budgets import Budget
from harness.units import format_duration, format_rate
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
class Allowance:
    """Growth a healthy run of this scenario confirms over this window, not a leak.

    From :mod:`harness.analysis.calibration`: RSS and block counts of a fixed
    cache climb for minutes while the tree and the traffic fill. A rate is
    judged on its excess over ``per_h``: the interval's lower bound must clear
    what a healthy run's lower bound reached; ``source`` names whose growth it is.
    """

    amount: float  # series unit, over the window
    span_s: float  # the window the judged slope was fitted on
    source: str = "a healthy run"

    @property
    def per_h(self) -> float:
        return self.amount / self.span_s * 3600.0 if self.span_s > 0 else 0.0


def judge_rate(
    label: str,
    estimate: float,
    ci: tuple[float, float] | None,
    budget: Budget,
    allowance: Allowance | None = None,
) -> Judgement:
    """Judge a growth or per-operation rate against ``budget`` (same unit as ``limit``).

    ``allowance``: the healthy growth of this window, subtracted before judging.
    """
    limit, unit = budget.limit, budget.unit
    shift = allowance.per_h if allowance is not None else 0.0
    shown = _shown(estimate, ci, unit) + _after_allowance(allowance, unit)
    if ci is not None and ci[0] - shift > limit:
        # Rule confirmed-growth. False positives: a wander slower than the run
        # looks like a trend (the interval's correlation correction only sees
        # wobbles shorter than a few blocks); a transient the warm-up cut
        # missed; a healthy fill larger than any calibration run showed (the
        # allowance is the largest of several seeds, not a bound); and with a
        # zero budget, 2.5% of runs that do not grow at all.
        return Judgement("leak", "confirmed-growth", f"{label} {shown} is above {budget.text!r}.")
    noisy = _too_noisy(None if ci is None else (ci[0] - shift, ci[1] - shift), limit)
    if estimate - shift > limit:
        # Rule unconfirmed-growth: the interval straddles the budget. False
        # positives by design: when the true growth sits at the budget, half of
        # all runs land here. It asks for a longer run, never fails a build.
        return Judgement(
            "suspicious", "unconfirmed-growth",
            f"{label} {shown} is above {budget.text!r} but the interval cannot confirm it"
            f"{noisy}{_settle(estimate - shift, ci, limit, allowance)}.",
        )
    # Rule within-budget. False negatives: a leak slower than the noise over a
    # short run; the "too noisy to judge" note says when that is possible.
    return Judgement("pass", "within-budget", f"{label} {shown} is within {budget.text!r}{noisy}.")


def _after_allowance(allowance: Allowance | None, unit: str) -> str:
    if allowance is None or allowance.amount <= 0:
        return ""
    return (
        f" less the {format_rate(allowance.per_h, unit)} {allowance.source} shows by itself "
        f"({format_rate(allowance.amount, unit.split('/')[0])} over "
        f"{format_duration(allowance.span_s)})"
    )


def _settle(excess: float, ci: tuple[float, float] | None, limit: float,
            allowance: Allowance | None) -> str:
    """About how long a run would settle it, if the interval narrows as one over the window.

    A rough middle: under white noise the slope's interval narrows faster (as
    the window to the power -1.5), under a random walk slower (-0.5).
    """
    if ci is None or allowance is None or not excess > limit:
        return ""
    half = (ci[1] - ci[0]) / 2.0
    needed = allowance.span_s * half / (excess - limit)
    return f"; a run of about {format_duration(max(needed, allowance.span_s))} would settle it"


def judge_level(label: str, held: Level, budget: Budget) -> Judgement:
    """Judge the highest value a gauge held against a ``<=`` budget."""
    peak = format_rate(held.peak, budget.unit)
    if held.sustained > budget.limit:
        sustained = format_rate(held.sustained, budget.unit)
        # Rule sustained-level. False positives: a legitimate burst longer than
        # SUSTAIN samples (a peer stalled for a second), or than a census's
        # CENSUS_SUSTAIN readings; give the limit headroom.
        held_text = (f"read {sustained} after what it counts had time to go"
                     if held.held_for == 1 else
                     f"held {sustained} for {held.held_for}+ samples")
        return Judgement("leak", "sustained-level", f"{label} {held_text}, over {budget.text!r}.")
    if held.peak > budget.limit and math.isnan(held.sustained):
        # Rule too-few-samples. Fewer than held_for samples so far: over the
        # limit, but whether it stays there is not known yet.
        return Judgement(
            "suspicious", "too-few-samples",
            f"{label} peaked at {peak} over {budget.text!r}; too few samples yet "
            f"(under {held.held_for}) to tell whether it stays there.",
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


FOLD_UNJUDGED = 3  # budgets a short-lived run could not judge, said in one line from here


def combine(
    judgements: Sequence[Judgement], outcome: str | None = None, outcome_reason: str | None = None
) -> tuple[str, list[str]]:
    """The run's verdict and its reasons, worst first."""
    ordered = sorted(judgements, key=lambda j: -SEVERITY[j.status])
    reasons = [j.reason for j in ordered]
    if outcome is not None:
        if outcome not in ENDING_VERDICTS:
            raise ValueError(f"process verdict {outcome!r} is not one of {ENDING_VERDICTS}.")
        # A run that ended early has little data: one line for the budgets it could
        # not judge, instead of one each (a crash listed 10), after those it could.
        unjudged = [j for j in ordered if j.rule == "no-data"]
        if len(unjudged) < FOLD_UNJUDGED:
            return outcome, [outcome_reason or f"the worker process ended: {outcome}.", *reasons]
        judged = [j.reason for j in ordered if j.rule != "no-data"]
        names = ", ".join(j.reason.partition(":")[0] for j in unjudged)
        short = [f"too little data before it ended to judge {names}."]
        return outcome, [outcome_reason or f"the worker process ended: {outcome}.", *judged,
                         *short]
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
