"""The worker: one fresh process per run, started by ``harness.parent.runner``.

``python -m harness.worker <rundir>/config.json``. It builds the scenario's
workload, starts the samplers and runs ``workload.step()`` until the duration
or the op count, streaming every sample to ``samples.jsonl``. It prints nothing
the parent reads; its stdout and stderr go to ``worker.log`` for people.

Exit codes: 0 finished (or stopped on request), 1 the scenario raised
(traceback in ``traceback.txt`` and a ``crash`` event), 2 the run was refused
before the workload started (a target that cannot be loaded, a budget on a
metric this run cannot publish; the sentence is in ``refused.txt``), 3 the
harness failed.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import psutil

from harness.api import Gauge, RunContext, TargetRejected, Workload, load_callable
from harness.config import RunConfig
from harness.control import USER_DIR_ENV, Heartbeat, StopRequest, die_with_parent
from harness.registry import load_scenario
from harness.runfiles.names import (
    CLOSED_EVENT,
    REFUSED_FILE,
    SAMPLES_FILE,
    STACKS_FILE,
    THREAD_DIED_EVENT,
    TRACEBACK_FILE,
)
from harness.runfiles.samples import SampleWriter, header
from harness.runfiles.signals import JUDGED_SIGNALS
from harness.worker.gcmode import apply_gc_mode
from harness.worker.loop import Limits, ScenarioFailure, drive
from harness.worker.samplers import Sampler, build_samplers, start_available
from harness.worker.samplers.base import forced_collection

# The phases around the main loop may take this long without being called hung
# (see Heartbeat.keep_alive): building a cache (imports, a native extension compiled
# on first use) and closing it (a storage tier's files removed).
BUILD_ALLOWANCE_S = 300.0
CLOSE_ALLOWANCE_S = 120.0

EXIT_OK, EXIT_CRASHED, EXIT_REFUSED, EXIT_HARNESS = 0, 1, 2, 3


class Refusal(Exception):
    """The run cannot give a meaningful verdict; said before the workload runs."""


class Worker:
    def __init__(self, config: RunConfig, writer: SampleWriter, stop: StopRequest) -> None:
        self.config = config
        self.writer = writer
        self.stop = stop
        self.heartbeat = Heartbeat(config.path)
        self.samplers: list[Sampler] = []
        self.t0 = time.monotonic()

    def clock(self) -> float:
        return time.monotonic() - self.t0

    def run(self) -> int:
        watch_threads(self.writer, self.clock)
        try:
            with self.heartbeat.keep_alive(BUILD_ALLOWANCE_S):
                workload = self.build()
        except Refusal as refusal:
            return refuse(self.config.path, refusal)
        try:
            gauges = self.gauges(workload)
            unknown_budgets(self.config, gauges)
        except Refusal as refusal:
            self.close(workload)
            return refuse(self.config.path, refusal)
        try:
            self.start_samplers(gauges)
            result = drive(workload, self.samplers, self.limits(), self.writer, self.beat)
        except ScenarioFailure as failure:
            # Record first: the final windows and close() below may fail too.
            code = record_failure(self.config.path, self.writer, failure, self.clock())
            self.write_notes(workload)  # what the idle books saw before the crash
            self.stop_samplers()  # the final windows show the state at the crash
            with contextlib.suppress(ScenarioFailure):
                self.close(workload)  # the first failure is the one reported
            return code
        # The workload stops here; what follows (final windows, the trim probe)
        # moves RSS for the harness's reasons, so analysis can cut at this event.
        self.writer.event("loop_end", self.clock(), ops=result.ops, reason=result.reason)
        self.write_notes(workload)
        self.stop_samplers()
        self.writer.event("end", self.clock(), ops=result.ops, reason=result.reason)
        self.close(workload)
        # Everything is written and checked: a stop signal from here on ends nothing.
        self.writer.event(CLOSED_EVENT, self.clock())
        return EXIT_OK

    def build(self) -> Workload:
        began = time.monotonic()
        if self.config.target is not None:
            check_target(self.config.target)
        try:
            scenario = load_scenario(self.config.scenario)
            context = RunContext(
                seed=self.config.seed, inject=self.config.inject, target=self.config.target,
                options=dict(self.config.options), rundir=self.config.path,
            )
            workload = scenario.build(context)
        except TargetRejected as exc:  # the user's cache cannot run it: their input, said once
            raise Refusal(str(exc)) from None
        except Exception as exc:
            raise ScenarioFailure("build") from exc
        with forced_collection():
            gc.collect()  # a clean baseline: the build's garbage is not the workload's
        self.t0 = time.monotonic()
        rss = psutil.Process().memory_info().rss
        described = describe_target(self.config.target)
        extra = {"target": described} if described else {}
        self.writer.event("start", 0.0, build_s=round(self.t0 - began, 3), rss=rss, **extra)
        return workload

    def gauges(self, workload: Workload) -> dict[str, Gauge]:
        try:
            return dict(workload.gauges())
        except Exception as exc:
            raise ScenarioFailure("gauges") from exc

    def start_samplers(self, gauges: dict[str, Gauge]) -> None:
        self.samplers = start_available(build_samplers(self.config, gauges), self.writer,
                                        self.clock)
        self.heartbeat.beat(self.clock())  # a census of a big heap takes seconds

    def write_notes(self, workload: Workload) -> None:
        """The workload's own facts for attribution (optional ``notes()``, see harness.api)."""
        notes = getattr(workload, "notes", None)
        if not callable(notes):
            return
        try:
            found = dict(notes())
        except Exception as exc:  # a helper's failure must not cost the run
            found = {"error": f"{type(exc).__name__}: {exc}"}
        if found:
            self.writer.write({"type": "notes", "t": round(self.clock(), 4), **found})

    def limits(self) -> Limits:
        c = self.config
        return Limits(c.duration_s, c.max_ops, c.warmup_s, c.intervals.progress_s, self.clock,
                      self.stop)

    def beat(self, now: float) -> None:
        if self.heartbeat.beat(now):
            self.stop.set("stop file")

    def stop_samplers(self) -> None:
        for sampler in self.samplers:
            self.heartbeat.beat(self.clock())  # final windows can take seconds on big heaps
            sampler.stop()
        self.samplers = []

    def close(self, workload: Workload) -> None:
        try:
            with self.heartbeat.keep_alive(CLOSE_ALLOWANCE_S):
                workload.close()
        except Exception as exc:
            raise ScenarioFailure("close") from exc


def check_target(spec: str) -> None:
    """Refuse a target that cannot be imported, before the scenario builds on it."""
    try:
        load_callable(spec)
    except Exception as exc:  # whatever the import raised: the user's module, the user's words
        why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
        raise Refusal(f"the target {spec!r} cannot be loaded ({why}).") from None


def describe_target(spec: str | None) -> str | None:
    """What a target says it runs (a built-in one's ``describe()``: the release and where
    it comes from), read after the build loaded it; None for the reference or a target
    that says nothing. A failing description costs the run nothing."""
    if spec is None:
        return None
    try:
        described = getattr(load_callable(spec), "describe", None)
        return str(described()) if callable(described) else None
    except Exception:  # the title falls back to the spec
        return None


def unknown_budgets(config: RunConfig, gauges: dict[str, Gauge]) -> None:
    """Refuse a budget on a metric this run will never record.

    The scenario's own budgets on a user's target (``config.skippable_budgets``)
    are exempt: a cache need not publish the reference cache's gauges, and the
    analysis says which it skipped.
    """
    known = {*JUDGED_SIGNALS, *gauges}
    for budget in config.budgets:
        if budget.metric not in known and budget not in config.skippable_budgets:
            raise Refusal(
                f"budget {budget.text!r}: this run publishes no metric {budget.metric!r}; "
                f"known: {', '.join(sorted(known))}."
            )


def refuse(rundir: Path, refusal: Refusal) -> int:
    (rundir / REFUSED_FILE).write_text(f"{refusal}\n", encoding="utf-8")
    return EXIT_REFUSED


def record_failure(rundir: Path, writer: SampleWriter | None, exc: BaseException, t: float) -> int:
    """Write the traceback to ``traceback.txt`` and as a ``crash`` event."""
    scenario = isinstance(exc, ScenarioFailure)
    cause = exc.__cause__ if scenario and exc.__cause__ is not None else exc
    text = "".join(traceback.format_exception(cause))
    (rundir / TRACEBACK_FILE).write_text(text, encoding="utf-8")
    if writer is not None:
        where = exc.where if isinstance(exc, ScenarioFailure) else "harness"
        error = "".join(traceback.format_exception_only(cause)).strip()
        writer.event("crash", t, where=where, error=error, traceback=text)
    return EXIT_CRASHED if scenario else EXIT_HARNESS


def watch_threads(writer: SampleWriter, clock: Callable[[], float]) -> None:
    """Record every thread that dies of an uncaught exception as a ``thread_died`` event.

    A serving engine's worker threads (a storage prefetch, a write-back, a transfer)
    die quietly: the process runs on, and whatever the thread was to finish or give
    back stays held. Python's own hook still prints the traceback to worker.log.
    """
    printed = threading.excepthook

    def died(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit:
            text = "".join(traceback.format_exception(args.exc_type, args.exc_value,
                                                      args.exc_traceback))
            error = "".join(traceback.format_exception_only(args.exc_type,
                                                            args.exc_value)).strip()
            name = args.thread.name if args.thread is not None else "a thread"
            writer.event(THREAD_DIED_EVENT, clock(), thread=name, error=error, traceback=text)
        printed(args)

    threading.excepthook = died


def open_stacks(rundir: Path) -> TextIO:
    """Where SIGUSR1 from the parent dumps every thread's stack before a kill."""
    stacks = (rundir / STACKS_FILE).open("w", encoding="utf-8")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    faulthandler.enable(file=sys.stderr, all_threads=True)  # segfaults go to worker.log
    return stacks


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    user_dir = os.environ.get(USER_DIR_ENV)
    if user_dir and user_dir not in sys.path:
        sys.path.append(user_dir)  # last: installed packages win over the user's files
    if not die_with_parent():
        return EXIT_HARNESS  # the runner died while we started: nobody would watch us
    config_path = Path(args[0])
    try:
        config = RunConfig.load(config_path)
    except Exception as exc:
        return record_failure(config_path.parent, None, exc, 0.0)
    rundir = config.path
    stacks = open_stacks(rundir)
    stop = StopRequest()
    stop.install()
    writer: SampleWriter | None = None
    worker: Worker | None = None
    ballast: list[Any] = []
    try:
        gc_info, ballast = apply_gc_mode(config.gc_mode, config.ballast_objects)
        writer = SampleWriter(rundir / SAMPLES_FILE)
        writer.write(header(config.to_dict(), gc_info))
        worker = Worker(config, writer, stop)
        return worker.run()
    except Exception as exc:
        return record_failure(rundir, writer, exc, worker.clock() if worker else 0.0)
    finally:
        del ballast
        if writer is not None:
            writer.close()
        faulthandler.unregister(signal.SIGUSR1)  # before its file goes away
        stacks.close()

