"""Older summaries brought up to date in memory, by the analysis that wrote them.

:mod:`harness.runfiles.summary` only loads and validates; what a newer version
adds comes from this analysis (one re-analysis of the samples, or reading the
recorded budget texts), so it lives here. Faces call :func:`upgrade` before a
report renders an old summary; reports never call the analysis themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from harness.analysis.cycle_shapes import aggregate_cycles
from harness.analysis.garbage import garbage_by_type
from harness.analysis.summary import TOP_ROWS, budget_limits, cycle_details, summarize
from harness.config import read_budget, read_budgets
from harness.errors import UsageError
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import SUMMARY_VERSION, Summary, Upgrade
from harness.verdicts import ENDING_VERDICTS


def upgrade(summary: Summary, run: RunData | None) -> Summary:
    """``summary`` brought to :data:`SUMMARY_VERSION` in memory, one version at a time.

    ``run`` is the run's samples, which an upgrade may re-analyse. An upgrade
    that cannot be done (no samples) stops there: the summary keeps its
    older version, and readers see what that version lacks as missing.
    """
    while summary.version < SUMMARY_VERSION:
        upgraded = UPGRADES[summary.version](summary, run)
        if upgraded.version == summary.version:
            return summary
        summary = upgraded
    return summary


def upgrade_from_v1(summary: Summary, run: RunData | None) -> Summary:
    """Version 2 of a version 1 summary: the fitted lines from one re-analysis of ``run``.

    The samples are analysed as the runner did (``summarize`` with the budgets
    and warm-up of the samples header's config), and only the per-series
    details (with their fitted lines) are taken: verdict, reasons and metrics
    stay the ones the file records. The lines are today's analysis of the old
    samples, the closest a version 1 run can come to the line it was judged on.
    Without samples, or when the recorded budgets cannot be analysed, the
    summary is returned unchanged.
    """
    if run is None:
        return summary
    config = run.header.get("config") or {}
    warmup = config.get("warmup_s")
    outcome = summary.verdict if summary.verdict in ENDING_VERDICTS else None
    try:
        budgets = read_budgets(map(str, config.get("budgets") or ()), "the recorded budgets")
        analysis = summarize(
            run, budgets, float(warmup) if isinstance(warmup, int | float) else None,
            outcome=outcome,
        )
    except (UsageError, ValueError):
        return summary
    details = {**_details(summary), "series": analysis.details["series"]}
    return replace(summary, extra={**summary.extra, "analysis": details}, version=2)


def upgrade_from_v2(summary: Summary, run: RunData | None) -> Summary:
    """Version 3 of a version 2 summary: what the run page shows, as the analysis has it.

    The parsed limits come from the budget texts the summary records (its
    judged budgets and its metrics' budgets); the garbage by type and the
    aggregated cycles, when the summary lacks them, from the samples' garbage
    windows after the warm-up. Without samples those two stay missing.
    """
    details = _details(summary)
    texts = [str(b["text"]) for b in details.get("budgets") or () if isinstance(b, Mapping)]
    texts += [str(m["budget"]) for m in summary.metrics.values() if m.get("budget")]
    limits = []
    for text in dict.fromkeys(texts):
        try:
            limits.append(read_budget(text, "the recorded budgets"))
        except UsageError:
            continue  # a text no budget reads: the page draws no limit for it
    details["limits"] = budget_limits(limits)
    if run is not None and "garbage_by_type" not in details:
        start = _warmup_of(run)
        details["garbage_by_type"] = [
            dataclasses.asdict(row) for row in garbage_by_type(run.garbage_windows, start)
        ][:TOP_ROWS]
    if run is not None and "cycles" not in details:
        cycles = [c for w in run.garbage_windows for c in w.get("cycles") or ()
                  if isinstance(c, Mapping)]
        details["cycles"] = cycle_details(aggregate_cycles(cycles))
    return replace(summary, extra={**summary.extra, "analysis": details}, version=3)


def _details(summary: Summary) -> dict[str, Any]:
    """The analysis details a summary holds (a version 1 file may hold a name instead)."""
    old = summary.extra.get("analysis")
    return dict(old) if isinstance(old, dict) else {}


def _warmup_of(run: RunData) -> float:
    """End of the declared warm-up: the worker's event, else the configured length, else 0."""
    if run.warmup_end_s is not None:
        return run.warmup_end_s
    configured = run.header.get("config", {}).get("warmup_s")
    return float(configured) if isinstance(configured, int | float) else 0.0


UPGRADES: dict[int, Upgrade] = {1: upgrade_from_v1, 2: upgrade_from_v2}
