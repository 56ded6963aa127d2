"""A run seen up to any end time, so the same rule can be replayed on prefixes.

:class:`RunView` knows which series a run has, the measured window, and how to
judge one budget on the data up to ``end_s`` (time to detect replays the rules
on growing prefixes). Results are memoised per (series, end): a summary asks for
the full-length trend several times and must compute it once.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from harness.analysis import garbage as gb
from harness.analysis.calibration import (
    ANY_SCENARIO,
    UNCALIBRATED,
    Calibration,
    load_calibration,
    on_reference,
)
from harness.analysis.filling import (
    FILL_GAUGE,
    NODE_GAUGE,
    still_filling,
    tree_share,
    unexplained,
)
from harness.analysis.fitline import fitted_line
from harness.analysis.metrics import judged_name
from harness.analysis.shapes import CENSUS_SUSTAIN, SUSTAIN, Level, level
from harness.analysis.trend import Trend, growth
from harness.analysis.verdict import Allowance, Judgement, judge_level, judge_rate, no_data
from harness.analysis.windows import (
    attribution_windows,
    bridged,
    held_back,
    residues_taken_off,
    traced_bytes,
    without,
)
from harness.basis import BASIS_WORDS
from harness.budgets import Budget
from harness.runfiles.rundata import RunData, Series, ops_series, workload_end
from harness.runfiles.signals import MEMORY_SIGNALS
from harness.runfiles.summary_records import FittedLine, SeriesDetail
from harness.units import format_duration, format_rate

GARBAGE = "cyclic_garbage"
FILLING_RULE = "-filling"  # suffix of a leak rule downgraded while the cache fills
RSS_ALONE_RULE = "-rss-alone"  # suffix of an RSS leak no allocator signal shows
RSS_SERIES = ("rss", "uss")
ALLOCATOR_SERIES = ("heap", "py_blocks", "shmem")  # where leaked memory comes from
RSS_ALONE_BYTES = 16e6  # uncorroborated RSS growth below this is at most suspicious
WITNESS_SHARE = 0.25  # an allocator accounting for this share of it corroborates RSS
FEW_DROPS_RULE = "-few-drops"  # suffix of a leak rule on a floor under too few drops
SHORT_RULE = "-short-run"  # suffix of a leak rule on a window shorter than the calibration's
# A floor under fewer drops confirms nothing: over its first 3 or 4 drops the leak
# zoo's sawtooth's heap floor rose 170 KB along a line (45 to 56 MB/h "confirmed"
# at 20 s), a fill that a 60 s run shows flat after 20 s. Five points are one
# chance ordering in 120, and enough for a bend to show against a line.
FLOOR_CONFIRM_DROPS = 5
# Signals a healthy cache grows by itself, judged on their excess (calibration).
CALIBRATED = ("rss", "uss", "heap", "py_blocks")
# Signals whose resolution a run states: the calibrated ones, and shared memory,
# which a healthy cache does not grow at all. Page-sized series cannot resolve
# less than a page over the window, however flat they were.
RESOLVED = (*CALIBRATED, "shmem")
PAGE = 4096.0
QUANTUM = {"shmem": PAGE, "rss": PAGE, "uss": PAGE}  # the smallest step a series moves by
# Series a tracemalloc window moves itself (its traces, tables and snapshots).
MEMORY_SERIES = ("rss", "uss", *MEMORY_SIGNALS)
CENSUS_SERIES = ("tensor_pinned",)  # counted, not allocated: an allocation window moves none
# Gauges read only once what they count has had time to go: ``held_in_transfer`` is what
# the books still count in transfer at the end of a quiet stretch (at least a second and
# 40 event rounds with nothing running or waiting: scenarios.workloads.quiet). A reading
# is already held; one at the run's end (a stretch at 19.5 s of 20) must convict too.
SETTLED_SERIES = ("held_in_transfer",)
COUNT_SIGNALS = tuple(name for name, unit in MEMORY_SIGNALS.items() if not unit)
BYTE_SERIES = ("rss", "uss", *(name for name, unit in MEMORY_SIGNALS.items() if unit == "B"))


class RunView:
    """One run, its series by name and measured window; judges budgets on prefixes."""

    def __init__(
        self, run: RunData, warmup_s: float | None, calibration: Calibration | None = None,
        until_s: float | None = None,
    ) -> None:
        self.run = run
        self.warmup_s = warmup_s
        self.calibration = calibration or load_calibration()
        # A recorded program may declare the scenario it runs (harness.record.scenario).
        declared = run.event("scenario")
        self.scenario = str(declared["scenario"] if declared else
                            run.header.get("config", {}).get("scenario", ANY_SCENARIO))
        # The code under test (--target): its own calibration points when it has them.
        self.target: str | None = run.header.get("config", {}).get("target") or None
        self.series: dict[str, Series] = {
            name: s for name, s in (("rss", run.rss), ("uss", run.uss)) if len(s)
        }
        self.series.update({
            name: held_back(s, run.garbage_windows, name)
            for name, s in run.memory.items() if len(s)
        })
        self.series.update({name: s for name, s in run.gauges.items() if name not in self.series})
        # Samples an allocation window slowed down (tracemalloc, ~2x) judge nothing,
        # but a census of what the program holds (tracemalloc pins no tensor) stays.
        self.traced = attribution_windows(run)
        bounds = traced_bytes(run)
        self.series = {
            name: s if name in CENSUS_SERIES
            else bridged(s, self.traced, bounds) if name in MEMORY_SERIES
            else without(s, self.traced)
            for name, s in self.series.items()
        }
        self.ops = ops_series(run)
        self.end_s = workload_end(run, self.ops)
        if until_s is not None:  # an early stop's decision: judged on what it saw
            self.end_s = min(self.end_s, until_s)
        self.start_s = warmup_s if warmup_s is not None else _first_time(run)
        self._trends: dict[tuple[str, float], Trend | None] = {}
        self._garbage = _garbage_until(run, self.end_s)  # read records once

    def known(self) -> list[str]:
        return sorted({*BYTE_SERIES, *MEMORY_SIGNALS, GARBAGE, *self.run.gauges})

    def check(self, budget: Budget, tolerate_missing: bool = False) -> None:
        """Raise ``ValueError`` if ``budget`` names no known metric or has the wrong unit."""
        name, text = budget.metric, budget.text
        if name not in self.known():
            if tolerate_missing:
                return
            raise ValueError(
                f"budget {text!r}: unknown metric {name!r}; known: {', '.join(self.known())}."
            )
        if name == GARBAGE and (budget.kind != "rate" or budget.unit != "/kop"):
            raise ValueError(f"budget {text!r}: cyclic garbage is counted per work: '0.5 /kop'.")
        if name != GARBAGE and budget.per == "kop":
            raise ValueError(f"budget {text!r}: {name} is judged per hour ('/h') or as '<= N'.")
        if name in BYTE_SERIES and not budget.is_bytes:
            raise ValueError(f"budget {text!r}: {name} is in bytes: write '50 MB/h' or '<= 2 GiB'.")
        if name in COUNT_SIGNALS and budget.is_bytes:
            raise ValueError(f"budget {text!r}: {name} is a count: write '800000 /h' or '<= 1e6'.")

    def trend(self, name: str, end_s: float) -> Trend | None:
        key = (name, end_s)
        if key not in self._trends:
            s = self.series[name]
            keep = s.t <= end_s
            self._trends[key] = growth(s.t[keep], s.v[keep], self.warmup_s)
        return self._trends[key]

    def fit(self, name: str, end_s: float) -> FittedLine | None:
        """The line the growth of ``name`` was judged on, for plots to draw."""
        trend = self.trend(name, end_s)
        if trend is None:
            return None
        s = self.series[name]
        keep = s.t <= end_s
        return fitted_line(s.t[keep], s.v[keep], trend, s.unit)

    def level(self, name: str, end_s: float) -> Level | None:
        s = self.series[name]
        keep = (s.t >= self.start_s) & (s.t <= end_s) & np.isfinite(s.v)
        sustain = (1 if name in SETTLED_SERIES
                   else CENSUS_SUSTAIN if name in CENSUS_SERIES else SUSTAIN)
        return level(s.v[keep], sustain) if np.any(keep) else None

    def garbage(self, end_s: float) -> gb.Rate | None:
        if self._garbage is None:
            return None
        return gb.garbage_rate(self._garbage, self.ops, self.start_s, min(end_s, self.end_s))

    def ops_per_s(self) -> float | None:
        if len(self.ops) < 2 or not self.end_s > self.start_s:
            return None
        done = np.interp([self.start_s, self.end_s], self.ops.t, self.ops.v)
        return float(done[1] - done[0]) / (self.end_s - self.start_s)

    def judge(self, budget: Budget, end_s: float) -> tuple[Judgement, str]:
        """The judgement on data up to ``end_s`` and the metric name it belongs to."""
        name = budget.metric
        if name == GARBAGE:
            rate = self.garbage(end_s)
            if rate is None:
                return no_data("cyclic garbage", "no gc events or no operations counted."), name
            return judge_rate("cyclic garbage", rate.per_kop, rate.ci, budget), name
        if name not in self.series:
            return no_data(name, "the run recorded no samples of it."), f"{name}_growth"
        if budget.kind == "level":
            held = self.level(name, end_s)
            if held is None:
                return no_data(name, "no samples after warm-up."), f"{name}_max"
            return judge_level(name, held, budget), f"{name}_max"
        trend = self.trend(name, end_s)
        if trend is None:
            return no_data(name, "too few samples after warm-up to fit a slope."), f"{name}_growth"
        slope = trend.judged
        label = f"{name} {BASIS_WORDS[trend.basis]}"
        allowed = self.allowance(name, slope.span_s)
        judged = judge_rate(label, slope.per_h, slope.ci, budget, allowed)
        if judged.status == "leak" and name in CALIBRATED:
            judged = self._unless_tree_grows(name, trend, budget, allowed, judged)
        if judged.status in ("leak", "suspicious") and name in CALIBRATED:
            judged = self._unless_filling(judged, end_s)
        if judged.status == "leak" and trend.basis == "floor":
            judged = unless_few_drops(judged, trend)
        if judged.status == "leak" and name in RSS_SERIES:
            judged = self._unless_rss_alone(judged, trend, end_s)
        if judged.status == "leak" and allowed is not None:
            judged = self._unless_short(judged, end_s)
        return judged, judged_name(name, trend)

    def too_short(self, end_s: float) -> str | None:
        """Why a window up to ``end_s`` is too short for memory growth to convict (a
        clause naming how long a run must be), or None when it is long enough."""
        window = min(end_s, self.end_s) - self.start_s
        needed = self.calibration.judged_from_s
        if window >= needed:
            return None
        run_s = math.ceil(self.start_s + needed)
        return (f"the run measured {format_duration(max(window, 0.0))} after its warm-up, "
                f"under the {format_duration(needed)} the healthy growth it is judged against "
                f"was calibrated over; a run of at least {run_s}s (--duration {run_s}s) judges it")

    def _unless_short(self, judged: Judgement, end_s: float) -> Judgement:
        """Memory growth over a window shorter than the calibration's is ``suspicious``.

        Rule short-run. The allowance of a window shorter than any calibrated one is
        the shortest windows' amount as it is, which holds none of a short window's
        own wander: the healthy radix-steady at 5-6 s on a loaded machine confirmed
        66-135 MB/h of heap against 21 KB allowed, a leak in 6 runs of 12. Crashes,
        books, levels and cyclic garbage still convict a short run; growth waits for
        the calibrated length (``check`` keeps an injected cell running until then).
        False negative: a leak caught by memory growth alone in a run too short;
        the reasons say how long a run judges it.
        """
        why = self.too_short(end_s)
        if why is None:
            return judged
        reason = f"{judged.reason.rstrip('.')}, but {why}: growth alone confirms no leak."
        return Judgement("suspicious", f"{judged.rule}{SHORT_RULE}", reason)

    def _unless_rss_alone(self, judged: Judgement, trend: Trend, end_s: float) -> Judgement:
        """Resident memory that grew by little while no allocator shows growth is
        ``suspicious``: a leak of memory is memory some allocator handed out.

        Rule rss-alone. RSS moves by itself with the machine's load (pages the
        kernel faults in or reclaims, an arena glibc trims or not): a healthy
        cell of ``check -j 2`` on a busy 2-core machine grew 3 MB of RSS in 18 s,
        611 MB/h, while the heap, Python's blocks and shared memory stayed flat.
        False negative: a leak through an allocator none of those see (its own
        mmap, a second malloc linked into a C extension), until it has grown by
        RSS_ALONE_BYTES; then the rule lets it fail. Without any allocator signal
        recorded, RSS judges alone as before.
        """
        slope = trend.judged
        amount = slope.per_h * slope.span_s / 3600.0
        witnesses = [name for name in ALLOCATOR_SERIES if name in self.series]
        if amount >= RSS_ALONE_BYTES or not witnesses:
            return judged
        if any(self._grows_with_rss(name, end_s, amount) for name in witnesses):
            return judged
        flat = ", ".join(witnesses)
        reason = (f"{judged.reason.rstrip('.')}, but that is {format_rate(amount, 'B')} over "
                  f"{format_duration(slope.span_s)} and no allocator shows it ({flat} do not "
                  f"grow with it): resident memory alone moves with the machine's load; "
                  f"under {format_rate(RSS_ALONE_BYTES, 'B')} it does not confirm a leak.")
        return Judgement("suspicious", f"{judged.rule}{RSS_ALONE_RULE}", reason)

    def _grows_with_rss(self, name: str, end_s: float, rss_bytes: float) -> bool:
        """Whether ``name`` confirms growth beyond its healthy allowance, and, for bytes,
        enough of it to account for WITNESS_SHARE of the RSS growth."""
        trend = self.trend(name, end_s)
        if trend is None:
            return False
        slope = trend.judged
        allowed = self.allowance(name, slope.span_s)
        shift = allowed.per_h if allowed is not None else 0.0
        if slope.ci[0] - shift <= 0:
            return False
        if self.series[name].unit != "B":  # a count (Python's blocks): kept objects
            return True
        return (slope.per_h - shift) * slope.span_s / 3600.0 >= WITNESS_SHARE * rss_bytes

    def _unless_filling(self, judged: Judgement, end_s: float) -> Judgement:
        """A cache still filling makes memory growth ``suspicious`` (harness.analysis.filling)."""
        # The raw gauge: a tracemalloc window slows the load, it does not move the fill.
        note = still_filling(self.run.gauges.get(FILL_GAUGE), self.start_s,
                             min(end_s, self.end_s))
        if note is None:
            return judged
        reason = f"{judged.reason.rstrip('.')}, but {note}."
        return Judgement("suspicious", f"{judged.rule}{FILLING_RULE}", reason)

    def _unless_tree_grows(self, name: str, trend: Trend, budget: Budget,
                           allowed: Allowance | None, judged: Judgement) -> Judgement:
        """A leak only while the tree's own growth in nodes is counted is ``suspicious``."""
        slope = trend.judged
        nodes = self.run.gauges.get(NODE_GAUGE)
        first_s = float(nodes.t[0]) if nodes is not None and len(nodes) else 0.0
        share = tree_share(self.series[name], nodes, first_s,
                           (trend.end_s - slope.span_s, trend.end_s))
        if share is None:
            return judged
        estimate, ci = unexplained(slope, share)
        if judge_rate(name, estimate, ci, budget, allowed).status == "leak":
            return judged
        shift = allowed.per_h if allowed is not None else 0.0
        unit = self.series[name].unit + "/h"
        left = (f"{format_rate(estimate - shift, unit)} (95% CI {format_rate(ci[0] - shift, unit)}"
                f" to {format_rate(ci[1] - shift, unit)})")
        reason = (f"{judged.reason.rstrip('.')}, but {share.sentence()}; less that too, {left} "
                  f"remains, which does not confirm growth above {budget.text!r}. Growth bounded "
                  f"by the cache's capacity cannot be told from a leak until the tree stops "
                  f"growing: run until {NODE_GAUGE} levels off.")
        return Judgement("suspicious", f"{judged.rule}{FILLING_RULE}", reason)

    def allowance(self, name: str, span_s: float) -> Allowance | None:
        """The calibrated healthy growth of ``name`` over ``span_s`` (None for gauges)."""
        if name not in CALIBRATED or self.scenario == UNCALIBRATED:
            return None
        amount = self.calibration.allowance(name, self.scenario, span_s, self.target)
        who = self.calibration.measured_as(name, self.scenario, self.target)
        whose = ("a healthy cache" if who is None else f"the fixed {self.scenario}"
                 if on_reference(who) else f"the fixed {self.scenario} on {self.target}")
        return Allowance(amount, span_s, whose)

    def resolution(self, name: str) -> float | None:
        """The smallest growth per hour this run can confirm in ``name``.

        Half the judged slope's interval (the noise of this run at this length)
        plus the growth a healthy run's interval confirmed over the same window
        (the calibration): a rate that much above zero has its lower bound clear
        the allowance, which a verdict asks of growth; never less than
        the series' smallest step (a page of shared memory) over the window.
        """
        trend = self.trend(name, self.end_s) if name in self.series else None
        if trend is None:
            return None
        slope = trend.judged
        allowed = self.allowance(name, slope.span_s)
        noise = (slope.ci[1] - slope.ci[0]) / 2.0 + (allowed.per_h if allowed else 0.0)
        step_per_h = QUANTUM.get(name, 0.0) * 3600.0 / slope.span_s if slope.span_s > 0 else 0.0
        return max(noise, step_per_h)

    def shape_details(self) -> dict[str, SeriesDetail]:
        """Per series: measured window, judged basis, shapes found and the fitted line:
        what a report draws, so that it shows the line the verdict was judged on
        without re-fitting."""
        found: dict[str, SeriesDetail] = {}
        for name in self.series:
            trend = self.trend(name, self.end_s)
            fit = self.fit(name, self.end_s)
            if trend is None or fit is None:
                continue
            step = trend.step
            raw = {"rss": self.run.rss, "uss": self.run.uss, **self.run.memory}.get(name)
            taken = None
            if name in MEMORY_SERIES and raw is not None:
                taken = tuple((float(end), float(amount)) for end, amount in
                              residues_taken_off(raw, self.series[name], self.traced))
            found[name] = SeriesDetail(
                trend.start_s, trend.end_s, trend.n, trend.basis, trend.plateau, trend.sped_up,
                trend.drops, (step.at_s, step.height) if step else None, fit, taken)
        return found


def unless_few_drops(judged: Judgement, trend: Trend) -> Judgement:
    """A floor under fewer than FLOOR_CONFIRM_DROPS drops makes growth ``suspicious``."""
    if trend.drops >= FLOOR_CONFIRM_DROPS:
        return judged
    period_s = (trend.end_s - trend.start_s) / trend.drops
    reason = (
        f"{judged.reason.rstrip('.')}, but a floor under {trend.drops} drops cannot tell a "
        f"fill from a leak; a run of about {format_duration(FLOOR_CONFIRM_DROPS * period_s)} "
        f"would show {FLOOR_CONFIRM_DROPS}."
    )
    return Judgement("suspicious", f"{judged.rule}{FEW_DROPS_RULE}", reason)


def _garbage_until(run: RunData, end_s: float) -> gb.Found | None:
    """Garbage found, with records taken after the workload stopped moved back to its end.

    The final gc flush and garbage window hold garbage the workload made before it
    stopped (nothing runs after ``loop_end`` but the samplers, whose own
    collections are not counted), so they count, at the end of the window.
    """
    found = gb.garbage_found(run.gc_events, run.garbage_windows)
    if found is None:
        return None
    return dataclasses.replace(found, t=np.minimum(found.t, end_s))


def _first_time(run: RunData) -> float:
    firsts = [float(np.min(s.t)) for s in (run.rss, run.ops, *run.gauges.values()) if len(s)]
    return min(firsts, default=0.0)
