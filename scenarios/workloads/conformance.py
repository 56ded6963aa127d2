"""Does a user's cache conform? Build it, drive it briefly, list every problem at once.

``leak-harness doctor --target mod:make [scenario ...]`` calls :func:`diagnose`
per scenario (loaded by name, as scenario modules are, so the harness does not
import this package). Each problem is one sentence; facts (gauges, which
budgets will judge, ops/s, the idle books) tell the user what a run will see.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.api import RunContext, Scenario, TargetRejected, load_callable
from harness.registry import load_scenario
from harness.runfiles.signals import JUDGED_SIGNALS
from scenarios.workloads.common import EXITS, call_factory
from scenarios.workloads.exits import Support
from scenarios.workloads.overlap import CALLS as OVERLAP_CALLS
from scenarios.workloads.overlap import missing_calls as missing_overlap_calls
from scenarios.workloads.protocol import missing_methods
from scenarios.workloads.sessions import CALLS as SESSION_CALLS
from scenarios.workloads.sessions import missing_calls as missing_session_calls
from scenarios.workloads.speculative import CALL as SPEC_CALL
from scenarios.workloads.speculative import missing_call as missing_spec_call

OPTIONAL = {
    "pool_accounting": "the idle books check (available + evictable + protected == size) "
                       "is skipped",
    "sanity_check": "the tree is not checked against the pools at idle",
}
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the scenarios package


@dataclass
class Diagnosis:
    scenario: str
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    # What the scenario's load asks for and the cache does not take: how many exit paths
    # it asks for, those skipped (path -> why), and why overlap scheduling, asked for, is off.
    exit_paths: int = 0
    skipped_paths: dict[str, str] = field(default_factory=dict)
    overlap_off: str | None = None
    sessions_off: str | None = None  # why streaming sessions, asked for, are off
    disagg_off: str | None = None  # why a PD scenario runs as one engine: a missing PD call
    speculation_off: str | None = None  # why speculative decoding, asked for, is off
    ops_per_s: float | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exercised(self) -> bool:
        """False when what the scenario is for does not run on this cache: every exit path
        its load asks for is skipped, or the overlap scheduling, the streaming sessions, the
        disaggregated prefill and decode or the speculative decoding it asks for are off."""
        all_skipped = bool(self.exit_paths) and len(self.skipped_paths) >= self.exit_paths
        return (not all_skipped and self.overlap_off is None and self.sessions_off is None
                and self.disagg_off is None and self.speculation_off is None)


def diagnose(scenario_name: str, target: str, seconds: float = 2.0) -> Diagnosis:
    """Every problem ``target`` has under ``scenario_name``, found in one short drive."""
    found = Diagnosis(scenario_name)
    try:
        load_callable(target)
        scenario = load_scenario(scenario_name)
    except Exception as exc:
        found.problems.append(f"cannot load: {type(exc).__name__}: {exc}.")
        return found
    try:
        workload = scenario.build(RunContext(seed=0, target=target))
    except TargetRejected:  # the missing methods; listed with everything else said of them
        _methods(call_factory(load_callable(target), {"inject": ()}), found)
        return found
    except Exception as exc:
        found.problems.append(f"building the cache failed: {_raised(exc)}.")
        return found
    cache = getattr(workload, "cache", None)
    if cache is None or not _methods(cache, found):
        return found
    _coverage(workload, found)
    gauges = _gauges(workload, found)
    _drive(workload, seconds, found)
    _read_stats(cache, found)
    _idle_books(workload, found)
    _budgets(scenario, gauges, found)
    try:
        workload.close()
    except Exception as exc:
        found.problems.append(f"close() raised {_raised(exc)}.")
    return found


def _methods(cache: Any, found: Diagnosis) -> bool:
    """False when required methods are missing: driving would only crash on the first."""
    missing = missing_methods(cache)
    if missing:
        found.problems.append(f"the cache ({type(cache).__name__}) lacks {', '.join(missing)}: "
                              "the scheduler calls every one of them.")
    for name, consequence in OPTIONAL.items():
        if not callable(getattr(cache, name, None)):
            found.facts.append(f"no {name}(): {consequence}.")
    _exit_calls(cache, found)
    _feature_calls(cache, found)
    return not missing


def _exit_calls(cache: Any, found: Diagnosis) -> None:
    """Which exit paths (aborts, timeouts, failures, retraction) the cache can take."""
    support = Support.of(cache)
    taken = [call for call, ok in (
        ("release_aborted_request (aborts and timeouts while waiting)", support.release_waiting),
        ("cache_finished_req(is_insert=False) (aborts, failures, retraction while running)",
         support.release_running),
        ("match_waiting_req (the policy's match of waiting requests)", support.match_waiting),
    ) if ok]
    if taken:
        found.facts.append(f"exit-path calls implemented: {'; '.join(taken)}.")
    for path, reason in sorted(support.skipped(EXITS).items()):
        found.facts.append(f"exit path {path} is not taken in the *-exits scenarios: {reason}.")


# The load features a cache takes through optional calls: the facts' words for the calls
# it implements, what the scenarios do without them, the check naming what it lacks.
FEATURES: tuple[tuple[str, str, str, Callable[[Any], str | None]], ...] = (
    ("overlap-scheduling calls", ", ".join(OVERLAP_CALLS),
     "overlap scheduling is not run (radix-overlap runs with it off)", missing_overlap_calls),
    ("streaming-session calls", ", ".join(SESSION_CALLS),
     "streaming sessions are not run (the *-sessions scenarios run plain requests)",
     missing_session_calls),
    ("speculative-decoding call", SPEC_CALL,
     "speculative decoding is not run (the *-spec scenarios decode token by token)",
     missing_spec_call),
)


def _feature_calls(cache: Any, found: Diagnosis) -> None:
    """Whether the cache runs each load feature (overlap scheduling, streaming sessions,
    speculative decoding), or what it lacks for it."""
    for calls, names, without, missing_of in FEATURES:
        missing = missing_of(cache)
        found.facts.append(f"{calls} implemented: {names}." if missing is None
                           else f"{without}: {missing}.")


def _coverage(workload: Any, found: Diagnosis) -> None:
    """The exit paths and overlap scheduling this scenario's load asks for, and which of
    them the cache cannot take (the scheduler skips those)."""
    scheduler = getattr(workload, "scheduler", None)
    load = getattr(scheduler, "load", None)
    if load is None:
        return
    if load.exits.on:  # a cache with none of the exit calls skips every path asked for
        found.exit_paths = len(Support(False, False, False).skipped(load.exits))
        found.skipped_paths = dict(getattr(scheduler, "skipped_exits", {}))
    if load.overlap:
        found.overlap_off = getattr(scheduler, "skipped_overlap", None)
    if load.sessions.on:
        found.sessions_off = getattr(scheduler, "skipped_sessions", None)
    if load.disagg is not None:
        found.disagg_off = getattr(workload, "skipped_disagg", None)
    if load.speculation.on:
        found.speculation_off = getattr(scheduler, "skipped_speculation", None)


def _gauges(workload: Any, found: Diagnosis) -> dict[str, Any]:
    try:
        gauges = dict(workload.gauges())
    except Exception as exc:
        found.problems.append(f"the gauges could not be listed: stats() raised {_raised(exc)}.")
        return {}
    found.facts.append(f"publishes {len(gauges)} gauges: {', '.join(sorted(gauges))}.")
    return gauges


def _drive(workload: Any, seconds: float, found: Diagnosis) -> None:
    ops, began = 0, time.perf_counter()
    try:
        while time.perf_counter() - began < seconds:
            ops += workload.step()
    except Exception as exc:
        found.problems.append(f"the workload failed after {ops:,} ops: {_raised(exc)}.")
        return
    rate = ops / max(time.perf_counter() - began, 1e-9)
    found.ops_per_s = rate
    found.facts.append(f"drove {ops:,} ops in {seconds:g} s ({rate:,.0f} ops/s).")


def _read_stats(cache: Any, found: Diagnosis) -> None:
    try:
        stats = cache.stats()
    except Exception as exc:
        found.problems.append(f"stats() raised {_raised(exc)}.")
        return
    if not isinstance(stats, dict):
        found.problems.append(f"stats() returned a {type(stats).__name__}, not a dict of numbers.")
        return
    bad = sorted(k for k, v in stats.items() if not isinstance(v, int | float))
    if bad:
        found.problems.append(f"stats() gives values that are not numbers: {', '.join(bad)}.")
    shown = ", ".join(f"{k}={v:g}" for k, v in sorted(stats.items()) if k not in bad)
    found.facts.append(f"stats(): {shown or 'nothing'}.")


def _idle_books(workload: Any, found: Diagnosis) -> None:
    scheduler = getattr(workload, "scheduler", None)
    idle = getattr(scheduler, "idle_check", None)
    if idle is None:
        return
    if idle.has_books and idle.checks == 0:
        found.facts.append("no idle moment came in the drive: the idle books were not read.")
    elif idle.has_books:
        found.facts.append(f"the idle books were read {idle.checks} times.")
    if idle.mismatch:
        found.problems.append(f"at idle the books do not balance: off by {idle.mismatch} slots "
                              "(available + evictable + protected != size).")
    if idle.locked:
        found.problems.append(f"{idle.locked} tokens stay locked with no request running "
                              "(a dec_lock_ref missing?).")


def _budgets(scenario: Scenario, gauges: dict[str, Any], found: Diagnosis) -> None:
    known = {*JUDGED_SIGNALS, *gauges}
    judge = [b for b in scenario.budgets if b.partition(":")[0].strip() in known]
    skip = [b for b in scenario.budgets if b not in judge]
    found.facts.append(f"budgets that judge: {', '.join(judge) or 'none'}.")
    if skip:
        found.facts.append(f"budgets skipped (metric not published): {', '.join(skip)}.")


def _raised(exc: BaseException) -> str:
    """``Type: message at file:line in function``, at the innermost frame outside us."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not os.path.abspath(f.filename).startswith(HERE)]
    where = ""
    if frames:
        last = frames[-1]
        where = f" at {os.path.relpath(last.filename)}:{last.lineno} in {last.name}"
    return f"{type(exc).__name__}: {exc}{where}"
