"""One run's verdict, reasons and metrics: what ``summary.json`` holds.

:func:`summarize` is the single entry point the runner, CLI and pytest plugin
call. A budget names a metric family: ``rss`` / ``uss`` (bytes: growth per hour
or a level), ``cyclic_garbage`` (objects per 1000 operations), or any gauge
the run recorded (growth per hour or a level). Metric names are listed in
:mod:`harness.analysis.metrics`; besides the series ones there are
``cyclic_garbage`` (/kop), ``gen2_collections`` (/min), ``gc_pause`` (s/min)
and ``ops_per_s``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from harness.analysis import garbage as gb
from harness.analysis.calibration import Calibration
from harness.analysis.cycle_shapes import CycleShape, aggregate_cycles
from harness.analysis.describe import describe_resolution, describe_shapes, describe_short_run
from harness.analysis.metrics import level_metric, slope_metric, trend_metrics
from harness.analysis.runview import (
    FILLING_RULE,
    GARBAGE,
    RESOLVED,
    RunView,
)
from harness.analysis.seen import judge_seen, judge_threads, not_taken
from harness.analysis.verdict import (
    Judgement,
    combine,
    detection_grid,
    no_data,
    time_to_detect,
    worst,
)
from harness.analysis.where import where_it_grows
from harness.budgets import Budget
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import AnalysisDetails
from harness.runfiles.summary_records import (
    BudgetJudgement,
    CycleRow,
    Finding,
    Limit,
    Metric,
)

ANALYSIS_VERSION = 1
TOP_ROWS = 15


@dataclass
class Analysis:
    """Verdict, reasons (worst first), metrics by name, time to detect (s since start)."""

    verdict: str
    reasons: list[str]
    metrics: dict[str, Metric]
    time_to_detect_s: float | None = None
    window_s: tuple[float, float] | None = None  # measured: after warm-up to last sample
    details: AnalysisDetails = field(default_factory=AnalysisDetails)

    def to_json(self) -> dict[str, object]:
        return {
            "analysis_version": ANALYSIS_VERSION,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "time_to_detect_s": self.time_to_detect_s,
            "window_s": list(self.window_s) if self.window_s else None,
            "metrics": {name: metric.to_json() for name, metric in self.metrics.items()},
            "details": self.details.to_json(),
        }


def summarize(
    run: RunData,
    budgets: Sequence[Budget],
    warmup_s: float | None = None,
    *,
    outcome: str | None = None,
    outcome_reason: str | None = None,
    calibration: Calibration | None = None,
    skippable: Collection[Budget] = (),
    until_s: float | None = None,
) -> Analysis:
    """Analyse ``run`` against ``budgets`` (parsed where they were typed: :mod:`harness.budgets`).

    ``warmup_s``: seconds since start before which nothing is measured; None
    takes the run's ``warmup_end`` event (or 0). The window ends where the
    workload stopped (the ``loop_end`` or ``crash`` event, see
    :func:`harness.runfiles.rundata.workload_end`). Automatic detection may cut a
    further transient per series, never more than a third of what remains.
    ``outcome``: the runner's process verdict (``crashed``, ``hung``,
    ``ceiling``, ``error``), which overrides; the partial data is still
    analysed, and budgets naming gauges the run never recorded are reported
    instead of raising. ``calibration``: the healthy growth rates are judged
    against (default: the shipped one, :mod:`harness.analysis.calibration`).
    ``skippable``: budgets skipped with a stated reason when the run has
    no such metric (the scenario's gauge budgets on a user's cache).
    ``until_s``: end the window here at the latest (an early stop judges the
    samples that made its decision, not the ones that came while it stopped).
    Raises ``ValueError`` for a budget on an unknown metric or in the wrong unit.
    """
    view = RunView(run, warmup_s if warmup_s is not None else run.warmup_end_s, calibration,
                   until_s)
    parsed = list(budgets)
    skipped = [b for b in parsed if b in skippable and b.metric not in view.known()]
    parsed = [b for b in parsed if b not in skipped]
    for budget in parsed:
        view.check(budget, tolerate_missing=outcome is not None)
    metrics = _metrics(view)
    judgements = []
    for budget in parsed:
        judgement, name = view.judge(budget, view.end_s)
        judgements.append(judgement)
        if name in metrics:
            metrics[name] = metrics[name].judged(budget.text, judgement.status)
    skips = [_skipped(b) for b in skipped]
    if skipped and not parsed:
        skips.append(no_data("budgets", "none of them applies to this target."))
    # A process that ended badly is judged by its ending; a run that finished must
    # have done the work its scenario exists for (harness.analysis.seen).
    unseen = None if outcome is not None else judge_seen(run, view.start_s, view.end_s,
                                                         view.scenario)
    evidence = None
    if outcome == "crashed" and _leak_before_crash(view, parsed, judgements):
        # A budget convicted the run before the code under test raised (the end-of-run
        # check after the books already did): a leak, the exception its evidence.
        outcome, evidence = None, outcome_reason
    died = judge_threads(run)
    extra = [j for j in (unseen, died) if j is not None]
    verdict, reasons = combine([*judgements, *skips, *extra], outcome, outcome_reason)
    if evidence is not None:  # first, where a process ending's reason goes
        reasons = [evidence, *reasons]
    shapes = describe_shapes(view, _judged_series(parsed))
    reasons += (shapes + describe_short_run(view, parsed) + describe_resolution(view)
                + not_taken(run))
    where = where_it_grows(run, parsed, judgements, _judged_rates(view, parsed))
    filling = [j for j in judgements if j.rule.endswith(FILLING_RULE)]
    if filling and verdict == "suspicious" and all(
            j in filling for j in judgements if j.status == "suspicious"):
        note = filling[0].reason.partition(", but ")[2].rstrip(".")
        where = [Finding("none", "-", f"nothing is blamed: {note}")]
    elif not where and unseen is not None and verdict == unseen.status:
        where = [Finding("none", "-", "nothing is blamed: the run did not do the work its "
                                      "scenario exists for (see its reasons)")]
    elif not where and verdict == "pass":
        why = "; ".join(s.rstrip(".") for s in shapes if "plateau" in s or "sawtooth" in s)
        grows = "nothing grows beyond its budget" + (f": {why}" if why else "")
        where = [Finding("none", "-", grows)]
    return Analysis(
        verdict=verdict,
        reasons=reasons,
        metrics=metrics,
        time_to_detect_s=_time_to_detect(view, parsed, verdict),
        window_s=(view.start_s, view.end_s) if view.end_s > view.start_s else None,
        details=_details(view, [*parsed, *skipped], [*judgements, *skips[:len(skipped)]],
                         where),
    )


def _skipped(budget: Budget) -> Judgement:
    return Judgement("pass", "skipped", f"{budget.metric}: skipped: this cache publishes no "
                                        f"{budget.metric!r} (budget {budget.text!r}).")


def _metrics(view: RunView) -> dict[str, Metric]:
    found: dict[str, Metric] = {}
    for name, series in view.series.items():
        trend = view.trend(name, view.end_s)
        if trend is not None:
            found.update(trend_metrics(name, trend, series.unit))
        held = view.level(name, view.end_s)
        if held is not None:
            found.update(level_metric(name, held, series.unit))
        smallest = view.resolution(name) if name in RESOLVED else None
        if smallest is not None:
            found[f"{name}_resolution"] = Metric(
                smallest, f"{series.unit}/h", note="smallest growth this run can confirm (95%)"
            )
    rate = view.garbage(view.end_s)
    if rate is not None:
        found[GARBAGE] = Metric(rate.per_kop, "/kop", rate.ci, note=f"{rate.objects:.0f} objects")
    found.update(_gc_metrics(view))
    return found


def _gc_metrics(view: RunView) -> dict[str, Metric]:
    found: dict[str, Metric] = {}
    events, start, end = view.run.gc_events, view.start_s, view.end_s
    if events:
        per_min = gb.collections_per_min(events, 2, start, end)
        pause = gb.pause_per_min(events, start, end)
        if per_min is not None and pause is not None:
            found["gen2_collections"] = Metric(per_min, "/min")
            found["gc_pause"] = Metric(pause, "s/min")
    speed = view.ops_per_s()
    if speed is not None:
        found["ops_per_s"] = Metric(speed, "ops/s")
    return found


def _judged_rates(view: RunView, budgets: Sequence[Budget]) -> dict[str, float]:
    """The judged growth per hour of each series a rate budget names."""
    rates = {}
    for name in {b.metric for b in budgets if b.kind == "rate"} & set(view.series):
        trend = view.trend(name, view.end_s)
        if trend is not None:
            rates[name] = trend.judged.per_h
    return rates


def _judged_series(budgets: Sequence[Budget]) -> list[str]:
    return list(dict.fromkeys(["rss", *(b.metric for b in budgets if b.metric != GARBAGE)]))


def _leak_before_crash(view: RunView, budgets: Sequence[Budget],
                       judgements: Sequence[Judgement]) -> bool:
    """Whether a budget confirmed a leak before the scenario's code raised: the raise was
    the end-of-run check once the loop was over, or a shorter prefix of the samples
    already gave ``leak``. Code that raised first (an assertion in the loop with no
    leak confirmed before it) stays ``crashed``."""
    crash = view.run.event("crash")
    if crash is None or crash.get("where") in ("harness", "build") or not any(
            j.status == "leak" for j in judgements):
        return False
    if crash.get("where") == "close":
        return True
    detected = _time_to_detect(view, budgets, "leak")
    return detected is not None and detected < float(crash["t"])


def _time_to_detect(view: RunView, budgets: Sequence[Budget], verdict: str) -> float | None:
    """Earliest prefix end (s since start) from which the data gave ``verdict`` and kept it."""
    if verdict not in ("leak", "suspicious") or not budgets:
        return None

    def status_at(end_s: float) -> str:
        return worst([view.judge(budget, end_s)[0].status for budget in budgets])

    return time_to_detect(detection_grid(view.start_s, view.end_s), status_at, verdict)


def _details(
    view: RunView, budgets: Sequence[Budget], judgements: Sequence[Judgement],
    where: Sequence[Finding],
) -> AnalysisDetails:
    run = view.run
    cycles = [c for w in run.garbage_windows for c in w.get("cycles", ())]
    garbage = gb.garbage_by_type(run.garbage_windows, view.start_s)[:TOP_ROWS]
    growth = gb.object_growth(run.object_windows, view.start_s)[:TOP_ROWS]
    return AnalysisDetails(
        budgets=tuple(BudgetJudgement(b.text, j.status, j.rule, j.reason)
                      for b, j in zip(budgets, judgements, strict=True)),
        series=view.shape_details(),
        limits=budget_limits(budgets),
        garbage_by_type=tuple(garbage),
        object_growth=tuple(growth),
        cycles=cycle_rows(aggregate_cycles(cycles)),
        where=tuple(where),
    )


def cycle_rows(shapes: Sequence[CycleShape]) -> tuple[CycleRow, ...]:
    """The aggregated cycles as the summary stores them (the run page's cycle table)."""
    return tuple(CycleRow(c.shape, c.count, c.retained_bytes, c.types) for c in shapes)


def budget_limits(budgets: Sequence[Budget]) -> tuple[Limit, ...]:
    """Each budget parsed, by its text: reports draw limits without reading budget texts."""
    return tuple(Limit(b.text, b.metric, b.kind, b.limit, b.unit) for b in budgets)


__all__ = ["Analysis", "Metric", "slope_metric", "summarize"]
