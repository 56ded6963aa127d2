"""``leak-harness run``: one scenario in a fresh worker, its verdict and its report.

Arguments become a RunConfig here (defaults come from the scenario); every
malformed value becomes a UsageError whose sentence names the flag.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from contextlib import redirect_stdout
from pathlib import Path

from harness.analysis.calibration import short_run_warning
from harness.api import Scenario
from harness.config import DEFAULT_HEARTBEAT_S, GC_MODES, RunConfig
from harness.configure import duration_from, scenario_config
from harness.errors import UsageError
from harness.parent.progress import ProgressLine
from harness.parent.runner import prepare_rundir, run
from harness.registry import check_injections, load_scenario
from harness.runfiles.names import REPORT_FILE, SUMMARY_FILE
from harness.runfiles.summary import Summary
from harness.units import parse_size
from harness.verdicts import exit_code
from harness.worker.sampler_names import ATTRIBUTION_SAMPLERS, SAMPLER_NAMES
from leak_harness.cli.base import (
    add_strict_argument,
    add_where_argument,
    check_target_spec,
    default_rundir,
    interrupts,
    print_where,
    report_line,
)


class RunCommand:
    """Run one scenario in a fresh worker process, print its verdict and reasons, and
    write the run folder (samples.jsonl, summary.json, report.html with plots).

    examples:
      leak-harness run mamba-lru --inject mamba-lru-unlink --duration 30s
      leak-harness run radix-steady --target examples.own_cache:make --budget 'rss: 20 MB/h'
      leak-harness run mamba-lru --gc-mode server --duration 10m   # rare gen-2, RSS climbs
    """

    name = "run"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_run_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        scenario, config = config_from_args(args)
        prepare_rundir(config)  # an unwritable --out fails before anything is printed
        # With --json stdout carries the summary alone; people's text goes to stderr.
        human = sys.stderr if args.json else sys.stdout
        warning = short_run_warning(config.duration_s, config.warmup_s)
        if warning:  # growth cannot convict a run this short: said before it starts
            print(warning, file=human)
        line = ProgressLine(human, scenario.name, live=human.isatty())
        line.begin(config)
        cancel = threading.Event()
        try:
            with interrupts(cancel) as signals:
                outcome = run(config, on_progress=line.update, cancel=cancel)
        finally:
            line.end()
        with redirect_stdout(human):
            print(f"{scenario.name}: {outcome.verdict}")
            for reason in reasons_amount_first(outcome.summary):
                print(f"  - {reason}")
            print_where(outcome.summary.where_it_grows(), args.where)
            print(f"run folder: {outcome.rundir}")
            print(report_line(outcome.loaded))
        if args.json:
            print_summary_json(outcome.rundir, outcome.verdict, outcome.reasons)
        return signals.exit_code(exit_code(outcome.verdict, args.strict))


def reasons_amount_first(summary: Summary) -> list[str]:
    """The summary's reasons, each failing rate judged over a short window led by what
    grew over it ("+14.9 MB in 1.62s: rss growth 33.1 GB/h ..."): a rate per hour from
    seconds of samples is an extrapolation."""
    from reports.render.judged import judged_budgets  # lazy: no report on the import path

    amounts = {j.reason: j.amount_first() for j in judged_budgets(summary) if j.failing}
    return [f"{amounts[r]}: {r}" if amounts.get(r) else r for r in summary.reasons]


def print_summary_json(rundir: Path, verdict: str, reasons: list[str]) -> None:
    """The run's ``summary.json`` on stdout, with where its folder and report are (the
    verdict and reasons alone when the summary could not be written)."""
    path = rundir / SUMMARY_FILE
    summary = (json.loads(path.read_text(encoding="utf-8")) if path.exists()
               else {"verdict": verdict, "reasons": list(reasons)})
    summary["rundir"] = str(rundir)
    summary["report"] = str(rundir / REPORT_FILE)
    print(json.dumps(summary, indent=2))


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--json", action="store_true",
        help="print the summary (summary.json, with the run folder and report) on stdout; "
             "the human text goes to stderr")
    add("scenario", help="scenario name (see 'leak-harness list') or module:ATTR")
    add("--duration", help="how long to run, like 90s or 10m (default: the scenario's)")
    add("--ops", type=int, help="stop after this many operations")
    add("--warmup", help="warm-up before analysis starts (default: the scenario's)")
    # One name per flag, so that `run --inject NAME SCENARIO` leaves the scenario alone.
    add("--inject", action="append", default=[], metavar="NAME",
        help="switch on a named regression; repeat the flag for more than one")
    add("--seed", type=int, default=0, help="workload seed (default 0)")
    add("--out", help="run folder (default results/runs/<scenario>-<time>)")
    add("--gc-mode", choices=GC_MODES, help="default, server (large long-lived heap) or off")
    add("--timeout", help="wall-clock limit (default: duration + 120s)")
    add("--heartbeat", help="silence of the worker's main loop that counts as hung (30s)")
    add("--rss-ceiling", help="kill the run above this RSS, like 4GiB (default half the RAM)")
    add("--target", help="cache factory module:callable to test instead of the default")
    add_where_argument(parser)
    add_strict_argument(parser)
    add("--no-attribution", action="store_true",
        help="no allocation windows or owner search (where it grows is then not named)")
    add("--budget", action="append", default=[], metavar="'METRIC: LIMIT'",
        help="override a budget, like 'rss: 50 MB/h', or drop one: 'cyclic_garbage: off' "
             "(repeatable)")


def config_from_args(args: argparse.Namespace) -> tuple[Scenario, RunConfig]:
    scenario = load_scenario(args.scenario)
    inject = tuple(args.inject)
    check_injections(scenario, inject)
    check_target_spec(args.target)
    config = scenario_config(
        scenario,
        Path(args.out) if args.out else default_rundir(scenario.name),
        spec=args.scenario,
        duration_s=duration_from("--duration", args.duration) if args.duration else None,
        max_ops=args.ops,
        warmup_s=duration_from("--warmup", args.warmup) if args.warmup else None,
        inject=inject,
        seed=args.seed,
        target=args.target,
        gc_mode=args.gc_mode,
        budgets=tuple(args.budget),
        budgets_from="--budget",
        timeout_s=duration_from("--timeout", args.timeout) if args.timeout else None,
        heartbeat_s=(duration_from("--heartbeat", args.heartbeat) if args.heartbeat
                     else DEFAULT_HEARTBEAT_S),
        rss_ceiling=size("--rss-ceiling", args.rss_ceiling) if args.rss_ceiling else None,
        samplers=tuple(n for n in SAMPLER_NAMES
                       if not (args.no_attribution and n in ATTRIBUTION_SAMPLERS)),
    )
    return scenario, config


def size(flag: str, text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None
