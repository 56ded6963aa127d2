"""The worker: one fresh process per run, started by ``harness.parent.runner``.

``python -m harness.worker <rundir>/config.json``. It builds the scenario's
workload, starts the samplers and runs ``workload.step()`` until the duration
or the op count, streaming every sample to ``samples.jsonl``. It prints nothing
the parent reads; its stdout and stderr go to ``worker.log`` for people.

Exit codes: 0 finished (or stopped on request), 1 the scenario raised
(traceback in ``traceback.txt`` and a ``crash`` event), 3 the harness failed.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

import psutil

from harness.api import RunContext, Workload
from harness.config import RunConfig
from harness.control import Heartbeat, StopRequest, die_with_parent
from harness.registry import load_scenario
from harness.runfiles.names import SAMPLES_FILE, STACKS_FILE, TRACEBACK_FILE
from harness.runfiles.samples import SampleWriter, header
from harness.worker.gcmode import apply_gc_mode
from harness.worker.loop import Limits, ScenarioFailure, drive
from harness.worker.samplers import Sampler, build_samplers
from harness.worker.samplers.base import forced_collection

EXIT_OK, EXIT_CRASHED, EXIT_HARNESS = 0, 1, 3


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
        workload = self.build()
        try:
            self.start_samplers(workload)
            result = drive(workload, self.samplers, self.limits(), self.writer, self.beat)
        except ScenarioFailure as failure:
            # Record first: the final windows and close() below may fail too.
            code = record_failure(self.config.path, self.writer, failure, self.clock())
            self.stop_samplers()  # the final windows show the state at the crash
            with contextlib.suppress(ScenarioFailure):
                self.close(workload)  # the first failure is the one reported
            return code
        # The workload stops here; what follows (final windows, the trim probe)
        # moves RSS for the harness's reasons, so analysis can cut at this event.
        self.writer.event("loop_end", self.clock(), ops=result.ops, reason=result.reason)
        self.stop_samplers()
        self.writer.event("end", self.clock(), ops=result.ops, reason=result.reason)
        self.close(workload)
        return EXIT_OK

    def build(self) -> Workload:
        began = time.monotonic()
        try:
            scenario = load_scenario(self.config.scenario)
            context = RunContext(
                seed=self.config.seed, inject=self.config.inject, target=self.config.target,
                options=dict(self.config.options), rundir=self.config.path,
            )
            workload = scenario.build(context)
        except Exception as exc:
            raise ScenarioFailure("build") from exc
        with forced_collection():
            gc.collect()  # a clean baseline: the build's garbage is not the workload's
        self.t0 = time.monotonic()
        rss = psutil.Process().memory_info().rss
        self.writer.event("start", 0.0, build_s=round(self.t0 - began, 3), rss=rss)
        return workload

    def start_samplers(self, workload: Workload) -> None:
        try:
            gauges = dict(workload.gauges())
        except Exception as exc:
            raise ScenarioFailure("gauges") from exc
        for sampler in build_samplers(self.config, gauges):
            reason = sampler.unavailable()
            if reason is not None:
                self.writer.event("sampler_unavailable", self.clock(), sampler=sampler.name,
                                  reason=reason)
                continue
            sampler.start(self.writer, self.clock)
            self.samplers.append(sampler)

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
            workload.close()
        except Exception as exc:
            raise ScenarioFailure("close") from exc


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


def open_stacks(rundir: Path) -> TextIO:
    """Where SIGUSR1 from the parent dumps every thread's stack before a kill."""
    stacks = (rundir / STACKS_FILE).open("w", encoding="utf-8")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    faulthandler.enable(file=sys.stderr, all_threads=True)  # segfaults go to worker.log
    return stacks


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
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

