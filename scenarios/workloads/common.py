"""The workload every cache scenario runs: traffic, a scheduler, a cache.

A scenario names a factory (``module:callable``) and its options; the user can
swap the factory with ``--target`` and override options from the run config
(``options = {"cache": {...}, "load": {...}, "traffic": {...}}``), which is how
tests run every scenario with tiny settings.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from harness.api import Gauge, RunContext, Scenario, TargetRejected
from scenarios.workloads.disagg import missing_calls, pd_expects, pd_gauges
from scenarios.workloads.disagg_sides import make_scheduler
from scenarios.workloads.exits import (
    ABORT_RUNNING,
    ABORT_WAITING,
    FAIL_RUNNING,
    PATHS,
    RETRACT,
    TIMEOUT,
    Exits,
)
from scenarios.workloads.protocol import PrefixCache, missing_methods
from scenarios.workloads.quiet import Quiet
from scenarios.workloads.scheduler import Load, Scheduler
from scenarios.workloads.sessions import SessionDriver
from scenarios.workloads.speculative import ACTIVITY as SPEC_ACTIVITY
from scenarios.workloads.traffic import Traffic, TrafficShape

# Every cache scenario's budgets. The signals any process has: RSS (what production
# alarms on), the C heap and Python's blocks (exact, flat on a healthy cache, so
# they resolve small rates in short runs), resident shared memory (mappings that
# bypass both allocators; flat too), threads and open file descriptors (a thread
# or a file kept per unit of work holds almost no memory), cyclic garbage, and tensor
# storage kept alive by far smaller views (a level: healthy caches pin at most 25 KB,
# their allocators' free-list heads; SGLang #17191 pinned 400x the tree). Then the idle checks
# SGLang runs: the pools' books add up, nothing stays locked with nothing running.
GENERIC_BUDGETS = ("rss: 50 MB/h", "heap: 10 MB/h", "py_blocks: 250000 /h",
                   "shmem: 10 MB/h", "threads: 100 /h", "fds: 100 /h",
                   "cyclic_garbage: 0.5 /kop", "tensor_pinned: <= 1 MB")
IDLE_BUDGETS = ("idle_pool_mismatch: <= 0", "locked_while_idle: <= 0")
# Every scenario that takes an exit path judges the per-request tables of a cache that
# publishes them (request_tables()): an entry kept for a request that left is a leak
# of the path it left by (SGLang #9874). Skipped, said, for a cache without tables.
STALE_BUDGET = "stale_request_entries: <= 0"
DEFAULT_BUDGETS = (*GENERIC_BUDGETS, *IDLE_BUDGETS)
# From 10 minutes on (harness.configure.LONG_RUN_S), the caches whose healthy heap was
# measured that long are held to 1 MB/h: at 30 minutes the five measured moved by -31
# to +52 KB/h, no interval reaching 160 KB/h (docs/benchmarks.md, "The nightly length"),
# and a 5 MB/h malloc leak, within the 10 MB/h a short run can judge, is caught.
LONG_BUDGETS = ("heap: 1 MB/h",)
# The exit-path scenarios' load. Bursts queue requests, so aborts and timeouts find
# them waiting (the head of the queue already matched); after each burst is admitted
# decode runs with no arrivals, then the cache goes idle and the idle check reads
# the books. The small KV pools these scenarios use make decode retract requests.
EXITS = Exits(abort_waiting=0.05, abort_running=0.05, fail_running=0.02, timeout_steps=12,
              retract=True, match_ahead=8)
EXIT_LOAD = Load(pattern="bursts", burst_every=40, burst_size=24, max_running=8, exits=EXITS)
# The host-tier scenarios' quiet stretches (scenarios.workloads.quiet): every 300 traffic
# steps, once nothing runs or waits, event rounds alone, at least 40 and a second. The
# reference's copies take 2 rounds, SGLang's copy threads milliseconds: whatever the books
# still count in transfer after it is held (HELD_BUDGET).
QUIET = Quiet(every=300, rounds=40, seconds=1.0)
HELD_BUDGET = "held_in_transfer: <= 0"
HOST_LOAD = Load(quiet=QUIET)  # the default load with quiet stretches
HOST_EXIT_LOAD = dataclasses.replace(EXIT_LOAD, quiet=QUIET)
STATS_MAX_AGE_S = 0.05  # gauges sampled together share one stats() call
# What every run of the scheduler must show after its warm-up, as counter gauges: a
# request admitted, a decode step, a request finished. A cache that admits nothing
# (a prefetch that never completes) or decodes nothing (no slots for a batch) keeps
# every memory budget by doing no work; such a run judged nothing (harness.analysis.seen).
ACTIVITY = {"admitted": "requests admitted", "decoded": "decode steps",
            "finished": "requests finished"}
# With streaming sessions: sessions closed, and turns that ran on a session's kept memory.
SESSION_ACTIVITY = {"sessions_closed": "streaming sessions closed",
                    "session_turns_continued": "session turns run on the session's kept memory"}
# Each exit path the load asks for: the gauge that counts it and what it counts.
EXIT_ACTIVITY = {ABORT_WAITING: "waiting requests aborted", TIMEOUT: "waiting requests timed out",
                 ABORT_RUNNING: "running requests aborted",
                 FAIL_RUNNING: "running requests failed",
                 RETRACT: "running requests retracted (decode out of KV)"}


def call_factory(factory: Callable[..., Any], options: Mapping[str, Any]) -> Any:
    """Call a cache factory with the options it names (all of them if it takes ``**kwargs``).

    A scenario offers its reference cache options (``kv_size``, ``mamba_size``,
    ``pp_lag_s``, ...); a user's factory takes the ones it understands and need
    not swallow the rest with ``**_``. ``inject`` is an option like the others.
    """
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a C callable): pass them all
        return factory(**options)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return factory(**options)
    named = {p.name for p in parameters
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    return factory(**{k: v for k, v in options.items() if k in named})


class CacheWorkload:
    """Drives one cache through the scheduler; exposes the cache's stats as gauges."""

    def __init__(
        self,
        ctx: RunContext,
        factory: str,
        cache_options: Mapping[str, Any],
        load: Load,
        shape: TrafficShape,
    ) -> None:
        options = {**cache_options, **ctx.options.get("cache", {})}
        load = dataclasses.replace(load, **ctx.options.get("load", {}))
        shape = dataclasses.replace(shape, **ctx.options.get("traffic", {}))
        self.cache: PrefixCache = call_factory(ctx.factory(factory),
                                               {"inject": ctx.inject, **options})
        missing = missing_methods(self.cache) if ctx.target else []
        if missing:  # the run would crash on the first one, after a start-up's wait
            raise TargetRejected(
                f"the target {ctx.target!r} builds {type(self.cache).__name__}, which lacks "
                f"{', '.join(missing)}: the scheduler calls every one of them; "
                f"'leak-harness doctor --target {ctx.target}' lists every problem at once")
        # The scheduler takes the regressions too: one incident's site is SGLang's scheduler.
        # With load.disagg, one side of PD (scenarios.workloads.disagg) if the cache can.
        self.scheduler = make_scheduler(self.cache, Traffic.seeded(ctx.seed, shape), load,
                                        ctx.seed, regressions=ctx.inject)
        self.skipped_disagg = missing_calls(self.cache, load)
        self._stats: dict[str, float] = {}
        self._stats_at = 0.0

    def step(self) -> int:
        return self.scheduler.step()

    def _stat(self, name: str) -> float:
        now = time.monotonic()
        if now - self._stats_at > STATS_MAX_AGE_S:
            self._stats, self._stats_at = self.cache.stats(), now
        return float(self._stats.get(name, 0.0))

    def gauges(self) -> Mapping[str, Gauge]:
        cache = {name: functools.partial(self._stat, name) for name in self.cache.stats()}
        return {**cache, **self._health_gauges()}

    def _health_gauges(self) -> dict[str, Gauge]:
        """The scheduler's own counters and the idle check (``scenarios.workloads.health``).

        ``idle_pool_mismatch`` and ``idle_checks`` need the cache's
        ``pool_accounting()``; without it they are not published at all, so a
        budget naming them says "never recorded" instead of passing on zeros."""
        s = self.scheduler
        gauges: dict[str, Gauge] = {
            "admitted": lambda: s.admitted,
            "decoded": lambda: s.decoded,
            "finished": lambda: s.finished,
            "waiting": lambda: len(s.queue),
            "running": lambda: len(s.running),
            "alloc_failures": lambda: s.alloc_failures,
            "dropped": lambda: s.dropped,
            "rejected": lambda: s.rejected,
            "locked_while_idle": lambda: s.idle_check.locked,
            # How full the cache is; while it climbs, growth bounded by capacity
            # cannot be told from a leak (harness.analysis.filling).
            "cached_tokens": lambda: self.cache.full_evictable_size()
            + self.cache.full_protected_size(),
        }
        spec = s.speculative
        if spec is not None:  # verify steps and drafts rejected: the path was taken
            gauges["spec_verified"] = lambda: spec.verified
            gauges["drafts_rejected"] = lambda: spec.rejected
        if s.load.exits.on:  # the count of each exit path is a gauge
            for path in PATHS:
                gauges[exit_gauge(path)] = functools.partial(s.exits.__getitem__, path)
        if s.sessions is not None:  # streaming sessions (scenarios.workloads.sessions)
            gauges.update(session_gauges(s.sessions))
        gauges.update(pd_gauges(s))
        if s.idle_check.has_tables:
            gauges["stale_request_entries"] = lambda: s.idle_check.stale
        if s.idle_check.has_books:
            gauges["idle_pool_mismatch"] = lambda: s.idle_check.mismatch
            gauges["idle_checks"] = lambda: s.idle_check.checks
            if s.load.quiet.on:  # slots still in transfer after a quiet stretch: held
                gauges["held_in_transfer"] = lambda: s.quiet.held
        if s.load.quiet.on:
            gauges["quiet_stretches"] = lambda: s.quiet.stretches
        return gauges

    def notes(self) -> dict[str, Any]:
        """Facts for "Where it grows" that are not numbers: the locks held at idle."""
        notes: dict[str, Any] = {}
        unreleased = self.scheduler.idle_check.unreleased
        if unreleased:
            notes["unreleased_locks"] = unreleased
        slots = self.scheduler.idle_check.slots
        if slots is not None and slots.lost:  # the slots the books missed, by site and path
            notes["lost_slots"] = list(slots.lost)
        if self.scheduler.idle_check.stale_tables:
            notes["stale_request_entries"] = self._labelled(self.scheduler.idle_check.stale_tables)
        held = self.scheduler.quiet.last
        if held is not None and held.total:  # which pools, after how long a stretch
            notes["held_in_transfer"] = held.note()
        if self.scheduler.skipped_exits:
            notes["exit_paths_not_taken"] = dict(self.scheduler.skipped_exits)
        if self.scheduler.skipped_overlap:
            notes["overlap_not_taken"] = self.scheduler.skipped_overlap
        if self.scheduler.skipped_sessions:
            notes["sessions_not_taken"] = self.scheduler.skipped_sessions
        if self.skipped_disagg:
            notes["disagg_not_taken"] = self.skipped_disagg
        if self.scheduler.skipped_speculation:
            notes["speculation_not_taken"] = self.scheduler.skipped_speculation
        if self.scheduler.skipped_bigrams:
            notes["bigram_keys_not_taken"] = self.scheduler.skipped_bigrams
        notes["expects"] = {**expected_activity(self.scheduler), **pd_expects(self.scheduler)}
        said = getattr(self.cache, "notes", None)  # a target's own: what it does not drive
        if callable(said):
            notes["target_notes"] = [str(line) for line in said()]
        return notes

    def _labelled(self, tables: Mapping[str, Any]) -> dict[str, Any]:
        """Stale tables by name, each with the pool its entries hold where the cache says
        (its optional ``request_table_pools()``): ``ongoing_prefetch (host pool)``."""
        said = getattr(self.cache, "request_table_pools", None)
        pools = dict(said()) if callable(said) else {}
        return {(f"{name} ({pools[name]} pool)" if name in pools else name): dict(entries)
                for name, entries in tables.items()}

    def close(self) -> None:
        """Finish what runs, then SGLang's idle check: with no request running,
        tree, lists and pools must agree exactly (for a cache that has one)."""
        try:
            self.scheduler.drain()
            check = getattr(self.cache, "sanity_check", None)
            if callable(check):  # optional in the protocol
                check()
        finally:
            self.cache.close()


def session_gauges(sessions: SessionDriver) -> dict[str, Gauge]:
    """The session counters and how many are open now."""
    return {"sessions_opened": lambda: sessions.opened,
            "sessions_closed": lambda: sessions.closed,
            "session_turns_continued": lambda: sessions.continued,
            "session_turn_aborts": lambda: sessions.aborted,
            "sessions_live": lambda: len(sessions.open)}


def exit_gauge(path: str) -> str:
    """The counter gauge of an exit path: ``timeout`` -> ``exits_timeout``."""
    return f"exits_{path.replace('-', '_')}"


def expected_activity(scheduler: Scheduler) -> dict[str, str]:
    """The counter gauges a run of this scheduler must see rise after its warm-up, with
    what each counts: admissions, decode steps, finished requests, and every exit path
    the load asks for that the cache can take (one it cannot is in the notes instead,
    ``exit_paths_not_taken``: the cache lacks the call, which is the doctor's to say)."""
    expects = dict(ACTIVITY)
    if scheduler.sessions is not None:
        expects.update(SESSION_ACTIVITY)
        if scheduler.sessions.config.abort_turn > 0 and scheduler.sessions.can_abort:
            expects["session_turn_aborts"] = "session turns aborted mid-stream"
    if scheduler.speculative is not None:
        expects.update(SPEC_ACTIVITY)
    if scheduler.load.quiet.on:
        expects["quiet_stretches"] = "quiet stretches (nothing running or waiting)"
    exits = scheduler.load.exits
    if exits.on:
        asked = {ABORT_WAITING: exits.abort_waiting > 0, TIMEOUT: exits.timeout_steps > 0,
                 ABORT_RUNNING: exits.abort_running > 0, FAIL_RUNNING: exits.fail_running > 0,
                 RETRACT: exits.retract}
        for path, what in EXIT_ACTIVITY.items():
            if asked[path] and path not in scheduler.skipped_exits:
                expects[exit_gauge(path)] = what
    return expects


def build_cache_workload(
    ctx: RunContext,
    factory: str,
    cache_options: Mapping[str, Any] | None = None,
    load: Load | None = None,
    shape: TrafficShape | None = None,
) -> CacheWorkload:
    return CacheWorkload(ctx, factory, cache_options or {}, load or Load(), shape or TrafficShape())


def cache_scenario(
    name: str,
    description: str,
    factory: str,
    cache_options: Mapping[str, Any],
    regressions: tuple[str, ...] = (),
    load: Load | None = None,
    budgets: tuple[str, ...] = DEFAULT_BUDGETS,
    shape: TrafficShape | None = None,
    long_budgets: tuple[str, ...] = (),
    **timing: str,
) -> Scenario:
    """A Scenario whose workload is the scheduler over the named cache factory; with an
    exit load it budgets the cache's per-request tables (STALE_BUDGET) too."""

    def build(ctx: RunContext) -> CacheWorkload:
        return build_cache_workload(ctx, factory, cache_options, load, shape)

    stale = STALE_BUDGET.partition(":")[0]
    exits = load is not None and load.exits.on
    if exits and not any(b.partition(":")[0].strip() == stale for b in budgets):
        budgets = (*budgets, STALE_BUDGET)
    return Scenario(
        name=name,
        description=description,
        build=build,
        regressions=regressions,
        budgets=budgets,
        long_budgets=long_budgets,
        cache_options=dict(cache_options),
        if_published=(stale,) if exits else (),
        **timing,
    )


def run_standalone(scenario: Scenario, argv: list[str] | None = None) -> NoReturn:
    """``python scenarios/mamba_lru.py [run options]`` is ``leak-harness run mamba-lru
    [run options]``: this process becomes ``python -m leak_harness run mamba-lru ...``.

    An exec, not an import: a scenario sits below the command line and never imports it
    (``tests/harness/test_layers.py``). The same process goes on, so the output, Ctrl-C,
    SIGTERM and the exit code are the command's own.
    """
    args = sys.argv[1:] if argv is None else argv
    os.execv(sys.executable, [sys.executable, "-m", "leak_harness", "run", scenario.name, *args])
