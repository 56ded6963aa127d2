"""How much a healthy cache's signals grow by themselves: measured, stored as data.

RSS and Python block counts of a fixed cache keep climbing for minutes while
the tree and the traffic's conversation histories fill towards their bounds
(RSS by tens of MB/h over the first minute), while the C heap stays flat. A
rule that compared an interval with a budget alone would call a healthy cache
a leak, so each rate is judged on its excess over the growth the fixed cache
shows over a window of the same length.

``calibration.json`` beside this module holds that growth, written by
``bench/calibrate.py`` from runs of the fixed scenarios (``make calibrate``):
per signal and scenario, points ``[window_s, amount]``, one per run: how much
growth the judged slope's lower 95% bound of a fixed run confirmed (series
unit, with a margin; 0 when the bound was not above zero) over its judged
window of ``window_s`` seconds. The bound, not the slope, because a verdict
subtracts the amount from its run's own interval, which already holds the
run's noise. Points measured before 2026-12-02 23:00 UTC hold the whole judged
growth (a larger amount: the bound is below the slope) until they are
measured again; the file's ``how`` says which. ``"*"`` pools every scenario's
points, for scenarios without points of their own.

``shortest_window_s`` is the measured window (duration less warm-up) of the
calibration's shortest runs: 18 s, of ``make calibrate``'s 20 s runs. The
allowances say nothing of a window much shorter: its wander (RSS faulting in a
page, an arena the allocator grows) was never measured, and the shortest
windows' amount taken as it is let the healthy ``radix-steady`` be called a
``leak`` at 5-6 s in 6 of 12 runs on a loaded machine (a 21 KB allowance of
18 s against 3.5 s of heap samples). So memory growth over a window shorter
than :attr:`Calibration.judged_from_s` (COMPARABLE times it: "as long" as
those runs, in the sense the points already use) confirms no leak
(:mod:`harness.analysis.runview`, rule short-run).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
FORMAT = 1
ANY_SCENARIO = "*"
TARGET_SEPARATOR = "@"  # "radix-steady@sglang": a scenario's points on a target's code
# A recorded program that declares no scenario: nothing says how it grows when
# healthy, so nothing is allowed for (the cache scenarios' "*" would be a guess).
UNCALIBRATED = "record"
# Past the longest window measured (or between measured lengths), a fill keeps
# going but slows down: the amount is assumed to grow as the square root of the
# window (a guess on the safe side of "bounded"; measure longer windows to replace it).
BEYOND_EXPONENT = 0.5
# Windows this fraction of a judged window's length or longer are "as long" as it:
# the judged windows of runs of one length differ by warm-up and shape cuts.
COMPARABLE = 0.7
# Windows up to this much longer speak for it too (a 60 s run's for a 20 s run's
# last third); a 10-minute window holds minutes more of a slow fill than 60 s do.
LONGER_BY_S = 60.0

Points = list[tuple[float, float]]


@dataclass(frozen=True)
class Calibration:
    """Healthy growth amounts per signal and scenario (see the module docstring)."""

    signals: dict[str, dict[str, Points]]
    source: str = ""
    shortest_window_s: float = 0.0  # measured window of the shortest runs (0: not known)

    @property
    def judged_from_s(self) -> float:
        """The shortest measured window whose memory growth the allowances speak for
        (0: any, when the calibration does not say how long its runs were)."""
        return COMPARABLE * self.shortest_window_s

    def points(self, signal: str, scenario: str, target: str | None = None) -> Points:
        if scenario == UNCALIBRATED:
            return []
        who = self.measured_as(signal, scenario, target)
        return self.signals.get(signal, {}).get(who or ANY_SCENARIO, [])

    def measured_as(self, signal: str, scenario: str, target: str | None = None) -> str | None:
        """The key whose points speak for ``scenario`` on ``target``: the scenario on that
        target when measured there, else the scenario on the reference; None when
        neither was measured (``*`` stands in)."""
        if scenario == UNCALIBRATED:
            return None
        by_scenario = self.signals.get(signal, {})
        keys = (target_key(scenario, target), scenario) if target else (scenario,)
        return next((key for key in keys if by_scenario.get(key)), None)

    def measured(self, signal: str, scenario: str, target: str | None = None) -> bool:
        """Whether ``scenario`` has points of its own (else ``*`` stands in)."""
        return self.measured_as(signal, scenario, target) is not None

    def allowance(self, signal: str, scenario: str, window_s: float,
                  target: str | None = None) -> float:
        """The most a healthy run of ``scenario`` grows in ``signal`` over ``window_s``."""
        return healthy_amount(self.points(signal, scenario, target), window_s)


def target_key(scenario: str, target: str | None) -> str:
    """The calibration's key for ``scenario`` run on ``target`` (``radix-steady@sglang``).
    Another engine's code allocates differently (SGLang's tensors and Python objects
    per request are not the reference's), so its healthy growth is measured on it;
    these points never join ``*``, which speaks for the reference's scenarios."""
    return f"{scenario}{TARGET_SEPARATOR}{target}" if target else scenario


def on_reference(key: str) -> bool:
    """Whether a calibration key is a scenario on the reference caches (or ``*``)."""
    return TARGET_SEPARATOR not in key


def healthy_amount(points: Points, window_s: float) -> float:
    """The most a healthy run grew over a window about as long as ``window_s``
    (0 without points).

    Points speak for a window from COMPARABLE times its length up to
    LONGER_BY_S seconds longer: a longer window holds all of a shorter one's
    steps (the judged slope of a fixed run is often fitted on a part of it, and
    RSS grows in pages and arenas), so its amount bounds the shorter one's; a
    window minutes longer also holds minutes more of a slow fill, and a much
    shorter one's amount is mostly wander its slope would average out, so
    neither speaks. A window longer than any measured carries the amount of the longest
    windows below it as ``window_s ** BEYOND_EXPONENT``; one shorter than any
    takes the shortest windows' amount as it is.
    """
    if not points or not window_s > 0:
        return 0.0
    near = [a for w, a in points if COMPARABLE * window_s <= w <= window_s + LONGER_BY_S]
    if near:
        return max(max(near), 0.0)
    below = [w for w, _ in points if w < COMPARABLE * window_s]
    above = [w for w, _ in points if w > window_s + LONGER_BY_S]
    # The next longer windows' amount bounds any shorter window's fill.
    bound = cluster_most(points, min(above)) if above else math.inf
    if below:
        reach = max(below)
        most = max(max(a, 0.0) for w, a in points if COMPARABLE * reach <= w <= reach)
        return min(most * float((window_s / reach) ** BEYOND_EXPONENT), bound)
    return bound


def cluster_most(points: Points, shortest: float) -> float:
    """The most any window from ``shortest`` to 1/COMPARABLE times it grew."""
    return max(max(a, 0.0) for w, a in points if shortest <= w <= shortest / COMPARABLE)


def parse(data: Any, source: str) -> Calibration:
    """A calibration from its JSON form; ValueError with a sentence if malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{source} is not a leak-harness calibration (format {FORMAT}).")
    signals: dict[str, dict[str, Points]] = {}
    for signal, by_scenario in dict(data.get("signals", {})).items():
        signals[signal] = {
            scenario: [(float(w), float(a)) for w, a in points]
            for scenario, points in dict(by_scenario).items()
        }
        for points in signals[signal].values():
            if any(not (math.isfinite(w) and w > 0 and math.isfinite(a)) for w, a in points):
                raise ValueError(f"{source}: {signal} has a point that is not a finite window.")
    shortest = data.get("shortest_window_s", 0.0)
    if not isinstance(shortest, (int, float)) or not math.isfinite(shortest) or shortest < 0:
        raise ValueError(f"{source}: shortest_window_s must be a window in seconds.")
    return Calibration(signals, source, float(shortest))


def short_run_warning(duration_s: float | None, warmup_s: float,
                      where: str = "--duration") -> str | None:
    """One line for a run whose duration leaves a measured window under the shipped
    calibration's (:attr:`Calibration.judged_from_s`): its memory growth can make it
    suspicious, never a leak. None for a run long enough, or bounded by ops alone."""
    needed = load_calibration().judged_from_s
    if duration_s is None or duration_s - warmup_s >= needed:
        return None
    run_s = math.ceil(warmup_s + needed)
    measured = max(duration_s - warmup_s, 0.0)
    return (f"warning: {where} {duration_s:g}s measures {measured:g}s after its {warmup_s:g}s "
            f"warm-up, under the {needed:g}s the fixed caches' healthy growth is calibrated "
            f"over: memory growth can make it suspicious, never a leak (crashes, the pools' "
            f"books and levels still convict); run at least {run_s}s to judge growth.")


@cache
def load_calibration(path: Path = CALIBRATION_FILE) -> Calibration:
    """The calibration shipped with the harness (read once per process)."""
    return parse(json.loads(path.read_text(encoding="utf-8")), str(path))
