"""From ``leak-harness run`` arguments to a RunConfig: defaults come from the scenario.

Every malformed value becomes a UsageError whose sentence names the flag.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from harness.analysis.budgets import parse_budget
from harness.analysis.units import parse_duration, parse_size
from harness.api import Scenario
from harness.config import DEFAULT_HEARTBEAT_S, GC_MODES, RunConfig
from harness.errors import UsageError
from harness.registry import check_injections, load_scenario

RESULTS_DIR = Path("results") / "runs"
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("scenario", help="scenario name (see 'leak-harness list') or module:ATTR")
    add("--duration", help="how long to run, like 90s or 10m (default: the scenario's)")
    add("--ops", type=int, help="stop after this many operations")
    add("--warmup", help="warm-up before analysis starts (default: the scenario's)")
    add("--inject", nargs="+", action="extend", default=[], metavar="NAME",
        help="switch on a named regression (repeatable)")
    add("--seed", type=int, default=0, help="workload seed (default 0)")
    add("--out", help="run folder (default results/runs/<scenario>-<time>)")
    add("--gc-mode", choices=GC_MODES, help="default, server (large long-lived heap) or off")
    add("--timeout", help="wall-clock limit (default: duration + 120s)")
    add("--heartbeat", help="silence of the worker's main loop that counts as hung (30s)")
    add("--rss-ceiling", help="kill the run above this RSS, like 4GiB (default half the RAM)")
    add("--target", help="cache factory module:callable to test instead of the default")
    add("--budget", action="append", default=[], metavar="'METRIC: LIMIT'",
        help="override a budget, like 'rss: 50 MB/h' (repeatable)")


def config_from_args(args: argparse.Namespace) -> tuple[Scenario, RunConfig]:
    scenario = load_scenario(args.scenario)
    inject = tuple(args.inject)
    check_injections(scenario, inject)
    if args.target is not None and not _TARGET.match(args.target):
        raise UsageError(f"--target {args.target!r} is not 'module:callable'.")
    config = RunConfig(
        scenario=args.scenario,
        rundir=str(Path(args.out) if args.out else default_rundir(scenario.name)),
        duration_s=run_duration(args, scenario),
        max_ops=args.ops,
        warmup_s=duration("--warmup", args.warmup or scenario.warmup),
        inject=inject,
        seed=args.seed,
        target=args.target,
        gc_mode=args.gc_mode or scenario.gc_mode,
        timeout_s=duration("--timeout", args.timeout) if args.timeout else None,
        heartbeat_s=(duration("--heartbeat", args.heartbeat) if args.heartbeat
                     else DEFAULT_HEARTBEAT_S),
        rss_ceiling=size("--rss-ceiling", args.rss_ceiling) if args.rss_ceiling else None,
        budgets=merge_budgets(scenario.budgets, tuple(args.budget)),
    )
    return scenario, config


def run_duration(args: argparse.Namespace, scenario: Scenario) -> float | None:
    if args.duration:
        return duration("--duration", args.duration)
    if args.ops is not None:
        return None  # an op count alone bounds the run
    return duration("the scenario's default duration", scenario.default_duration)


def duration(flag: str, text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def size(flag: str, text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def merge_budgets(declared: tuple[str, ...], overrides: tuple[str, ...]) -> tuple[str, ...]:
    """The scenario's budgets, each replaced by a command-line one of the same kind.

    Same kind means same metric and same form (per hour, per kop, level), so
    overriding ``rss: 100 MB/h`` keeps a declared ``rss: <= 2 GiB``.
    """
    merged: dict[tuple[str, str, str], str] = {}
    for text in (*declared, *overrides):
        try:
            budget = parse_budget(text)
            merged[(budget.metric, budget.kind, budget.per)] = text
        except ValueError as exc:
            raise UsageError(f"--budget: {exc}") from None
    return tuple(merged.values())


def default_rundir(name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = RESULTS_DIR / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{stamp}"
    candidate, n = base, 1
    while candidate.exists():  # two runs in the same second
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate
