"""The budgets a run was judged on, each with its series and fitted line: pure.

A report leads with what convicted the run, so a reader sees the signal, its
rate against its budget and the samples behind it before anything else. All of
it comes from ``summary.json`` (the analysis's judged budgets, limits and
series): the page cannot disagree with the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.runfiles.summary import Summary
from harness.units import format_duration, format_rate
from reports.render.fitline import FitLine, stored_fit
from reports.render.numbers import format_growth

FAILING_STATUSES = ("leak", "suspicious")
# A judged window shorter than this leads with its amount ("+14.9 MB in 1.62s") before
# the rate per hour, which over seconds is an extrapolation ("+564 GB/h").
SHORT_WINDOW_S = 600.0


@dataclass(frozen=True)
class JudgedBudget:
    """One budget as the analysis judged it."""

    text: str  # "heap: 10 MB/h"
    series: str  # the series it reads: "heap", "work_list", "cyclic_garbage"
    kind: str  # "rate" or "level"
    limit: float  # in ``unit``
    unit: str  # the budget's canonical unit: "B/h", "/h", "/kop", "B", ""
    status: str
    reason: str
    fit: FitLine | None  # the judged line of a rate per hour; None for levels and per-kop
    # (end of window, amount): what each allocation window left behind, which the
    # analysis took off the later samples
    taken_off: tuple[tuple[float, float], ...] = ()

    @property
    def failing(self) -> bool:
        return self.status in FAILING_STATUSES

    @property
    def per_hour(self) -> bool:
        return self.kind == "rate" and self.unit.endswith("/h")

    @property
    def window_s(self) -> float | None:
        """Seconds of the judged window of a rate per hour; None without one."""
        if self.fit is None or not self.per_hour:
            return None
        return self.fit.end_s - self.fit.analysed_from_s

    def amount_first(self) -> str:
        """The amount over the judged window where that window is short (the rate per
        hour of seconds of samples is an extrapolation); empty otherwise."""
        window = self.window_s
        return self.amount() if window is not None and window < SHORT_WINDOW_S else ""

    def amount(self) -> str:
        """The fitted growth as an amount over the judged window: "+4.2 MB in 58 s"."""
        if self.fit is None or not self.per_hour:
            return ""
        span = self.fit.end_s - self.fit.analysed_from_s
        grown = self.fit.per_h * span / 3600.0
        sign = "+" if grown > 0 else ""
        shown = format_rate(grown, self.unit.split("/")[0])
        return f"{sign}{shown} in {format_duration(span)}"


def judged_budgets(summary: Summary) -> list[JudgedBudget]:
    """Every budget the summary judged, in its order; empty for older summaries."""
    limits = {limit.text: limit for limit in summary.limits()}
    judged = []
    for budget in summary.judged_budgets():
        limit = limits.get(budget.text)
        if limit is None:
            continue
        per_hour = limit.kind == "rate" and limit.unit.endswith("/h")
        fit = stored_fit(summary, limit.metric) if per_hour else None
        detail = summary.series_detail(limit.metric)
        judged.append(JudgedBudget(
            budget.text, limit.metric, limit.kind, limit.limit, limit.unit, budget.status,
            budget.reason, fit, (detail.taken_off or ()) if detail is not None else ()))
    return judged


def convicting(judged: Sequence[JudgedBudget]) -> list[JudgedBudget]:
    """The failing budgets, those that confirmed a leak before the suspicious ones (a
    suspicious RSS interval from 0 says less than a level held over its limit)."""
    return sorted((j for j in judged if j.failing), key=lambda j: j.status != "leak")


def failing_first(
    reasons: Sequence[str], judged: Sequence[JudgedBudget]
) -> tuple[list[str], list[str]]:
    """The summary's reasons split in two: those of failing budgets (and any reason that
    is not a budget's, such as a crash, when nothing failed on a budget), and the rest."""
    failing = {j.reason for j in judged if j.failing}
    passing = {j.reason for j in judged if not j.failing}
    first = [r for r in reasons if r in failing]
    rest = [r for r in reasons if r not in failing]
    if not first:  # a crash, a hang, a cut-short run: its own words lead
        first = [r for r in rest if r not in passing][:1]
        rest = [r for r in rest if r not in first]
    return first, rest


def convicting_signal(summary: Summary) -> str:
    """One phrase for an index cell: the first failing budget with its rate ("heap
    +43.7 MB/h [42.3, 45.1] over 'heap: 10 MB/h'"), led by its amount where the judged
    window is short ("rss +14.9 MB in 1.62s (+33.1 GB/h [1.22, 126]) over 'rss: 50
    MB/h'"), a process ending's first reason, or how many budgets held."""
    judged = judged_budgets(summary)
    failing = convicting(judged)
    if not failing:
        if summary.verdict == "pass":
            return f"{len(judged)} budgets held" if judged else "no budget judged"
        return summary.reasons[0] if summary.reasons else ""
    first = failing[0]
    metric = next((m for m in summary.metrics.values() if m.budget == first.text), None)
    if first.kind == "level" or metric is None or not math.isfinite(metric.value):
        return first.reason
    rate = format_growth(metric.value, list(metric.ci) if metric.ci else None, metric.unit)
    amount = first.amount_first()
    if amount:  # seconds of samples: what grew leads, the hourly rate follows
        return f"{first.series} {amount} ({rate}) over {first.text!r}"
    return f"{first.series} {rate} over {first.text!r}"
