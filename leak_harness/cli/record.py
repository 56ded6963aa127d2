"""``leak-harness record``: the samplers, analysis and report on an engineer's own program.

The parent side is :mod:`harness.parent.recording`, the recorder inside the
program :mod:`harness.record.recorder`; this module turns flags into a run
config, prints one section per recorded process and writes the index.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
import time
from pathlib import Path

from harness.analysis.calibration import UNCALIBRATED
from harness.config import RunConfig, SamplerIntervals
from harness.configure import duration_from, merge_budgets
from harness.errors import UsageError
from harness.parent import folder_lock
from harness.parent.recording import (
    Recorded,
    Stopped,
    conclude_processes,
    overall_verdict,
    program_from,
    recording_env,
    run_program,
)
from harness.runfiles.names import RECORD_INDEX, RECORD_SUMMARY
from harness.runfiles.signals import JUDGED_SIGNALS
from harness.runfiles.sources import sources_sentence, where_sources
from harness.verdicts import exit_code
from harness.worker.sampler_names import ATTRIBUTION_SAMPLERS, SAMPLER_NAMES
from leak_harness.cli.base import (
    add_strict_argument,
    add_where_argument,
    default_rundir,
    interrupts,
    print_where,
    report_line,
)

RECORD_DIR = Path("results") / "record"
# Generic budgets: what any process has. cyclic_garbage is per 1000 operations,
# so it needs the program's ops() hook: add it with --budget 'cyclic_garbage: 0.5 /kop'.
RECORD_BUDGETS = ("rss: 50 MB/h", "heap: 20 MB/h", "py_blocks: 250000 /h", "shmem: 10 MB/h",
                  "threads: 100 /h", "fds: 100 /h")
# A background thread samples the program: a lower rate than a worker's loop costs
# the program less (each wake takes the GIL).
RECORD_INTERVALS = SamplerIntervals(rss_s=0.2, uss_s=2.0, heap_s=0.2, gauges_s=0.5)
UNBOUNDED_OPS = 2**62  # no --duration: the program's end ends the recording
AT_ONCE_S = 1.0  # a program that ends sooner, after its warm-up, gave nothing to judge


class RecordCommand:
    """Run a Python program with leak-harness's samplers inside it, and give the same
    verdicts, reasons and report as a scenario run: RSS, C heap, Python blocks,
    shared memory, threads, file descriptors, GC activity, garbage windows,
    allocation windows and owner paths, judged against generic budgets.

    The program is stopped after --duration with SIGINT, then SIGTERM and SIGKILL
    --grace apart; without --duration the recording ends with the program or on
    Ctrl-C (then 'interrupted', never 'pass'). With --follow-children, Python
    children (multiprocessing fork and spawn, subprocess) are recorded too, each
    as its own section; the overall verdict is the worst. Optional hooks in the
    program: harness.record.ops(n), gauge(name, fn), idle() (see docs/record.md).

    examples:
      leak-harness record --duration 30s -- python app.py --port 8000
      leak-harness record --duration 1m --follow-children -- -m myserver
      leak-harness record --budget 'heap: 5 MB/h' --duration 2m -- python serve.py
    """

    name = "record"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add = parser.add_argument
        add("--duration", help="stop the program after this long, like 30s or 10m "
                               "(default: when it ends)")
        add("--grace", default="5s", help="wait between SIGINT, SIGTERM and SIGKILL (5s)")
        add("--warmup", default="2s", help="start of the analysis window (2s)")
        add("--out", help="recording folder (default results/record/<program>-<time>)")
        add("--follow-children", action="store_true",
            help="record Python child processes too, each in its own section")
        add("--no-attribution", action="store_true",
            help="no allocation windows or owner search")
        add_where_argument(parser)
        add_strict_argument(parser)
        add("--budget", action="append", default=[], metavar="'METRIC: LIMIT'",
            help="add or override a budget, like 'heap: 5 MB/h' or 'kv_lost: <= 0' (a gauge "
                 "the program registers), or drop one: 'rss: off' (repeatable)")
        add("command", nargs=argparse.REMAINDER,
            help="after '--': python app.py [args], -m package [args], or a python script")

    def run(self, args: argparse.Namespace) -> int:
        program = program_from(args.command)
        config = record_config(args, program.name)
        out = config.path
        claim(out)
        cancel = threading.Event()
        try:
            print(f"recording {program.shown}" + (f" for {args.duration}" if args.duration
                                                  else " until it ends"), flush=True)
            with interrupts(cancel, raise_interrupt=False) as signals:
                stopped = run_program(program, recording_env(out, args.follow_children, config),
                                      out, config.duration_s if args.duration else None,
                                      duration_from("--grace", args.grace), cancel,
                                      sys.stdout.buffer)
            processes = conclude_processes(out, stopped, shlex.join(sys.argv))
        finally:
            folder_lock.release(out)
        at_once = too_short(stopped, config)
        if at_once is not None:
            return at_once
        verdict = overall_verdict(processes)
        show(processes, verdict, stopped, args.where)
        write_index(out, processes, verdict, stopped)
        print(f"record folder: {out}")
        print(f"report: {out / RECORD_INDEX}")
        return signals.exit_code(exit_code(verdict, args.strict))


def record_config(args: argparse.Namespace, name: str) -> RunConfig:
    duration = duration_from("--duration", args.duration) if args.duration else None
    warmup = duration_from("--warmup", args.warmup)
    budgets = merge_budgets(RECORD_BUDGETS, args.budget, "--budget")
    # Gauges come from the program as it runs: a budget on one is skipped, with its
    # reason, when the program never registers it.
    gauges = tuple(b for b in budgets if b.metric not in JUDGED_SIGNALS)
    # Absolute: the program (and each child, which records itself) may change directory.
    out = (Path(args.out) if args.out else RECORD_DIR / default_rundir(name).name).absolute()
    return RunConfig(
        scenario=UNCALIBRATED, rundir=str(out), duration_s=duration,
        max_ops=None if duration else UNBOUNDED_OPS, warmup_s=warmup, budgets=budgets,
        skippable_budgets=gauges, intervals=RECORD_INTERVALS,
        samplers=tuple(n for n in SAMPLER_NAMES
                       if not (args.no_attribution and n in ATTRIBUTION_SAMPLERS)),
    )


def claim(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} already holds files; choose another output folder.")
    folder_lock.claim(out)


def too_short(stopped: Stopped, config: RunConfig) -> int | None:
    """A program that ended before anything could be measured: one sentence, its exit code."""
    if stopped.how != "exited" or stopped.wall_s >= config.warmup_s + AT_ONCE_S:
        return None
    code = stopped.exit_code if stopped.exit_code not in (0, None) else 2
    print(f"leak-harness: the program exited after {stopped.wall_s:.1f} s with exit code "
          f"{stopped.exit_code}, before anything could be measured (warm-up "
          f"{config.warmup_s:g} s); its output and samples are kept in {config.path}.",
          file=sys.stderr)
    return int(code)


def show(processes: list[Recorded], verdict: str, stopped: Stopped, show_where: str = "top",
         ) -> None:
    for p in processes:
        role = "the program" if p.is_program else "a child"
        print(f"process {p.pid} ({role}: {p.argv}): {p.outcome.verdict}")
        for reason in p.outcome.reasons:
            print(f"  - {reason}")
        print_where(p.outcome.summary.where_it_grows(), show_where, indent="  ")
        print(f"  {sources_line(p)}")
        print(f"  {report_line(p.outcome.loaded)}")
    print(f"overall: {verdict} ({len(processes)} process{'es' * (len(processes) != 1)}; "
          f"the program's exit code {stopped.exit_code})")


def sources_line(process: Recorded) -> str:
    """Which sources of "Where it grows" ran in the process, and why the others did not."""
    run = process.outcome.samples
    if run is None:
        return f"sources: unknown ({process.outcome.why_no_samples or 'no samples were read'})"
    return sources_sentence(where_sources(run))


def write_index(out: Path, processes: list[Recorded], verdict: str, stopped: Stopped) -> None:
    """``record.json`` (every process's verdict) and ``record.html`` (one plot per process)."""
    from reports.record import write_record_index  # lazy: matplotlib stays off this path

    summary = {
        "verdict": verdict,
        "stopped": {"how": stopped.how, "exit_code": stopped.exit_code,
                    "signals": list(stopped.signals), "wall_s": round(stopped.wall_s, 3)},
        "processes": [{"pid": p.pid, "argv": p.argv, "program": p.is_program,
                       "verdict": p.outcome.verdict, "folder": p.outcome.rundir.name,
                       "reasons": p.outcome.reasons,
                       "where": p.outcome.summary.where_it_grows(),
                       "sources": sources_line(p)} for p in processes],
        "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out / RECORD_SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    write_record_index(summary, out)
