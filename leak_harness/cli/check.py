"""``leak-harness check``: run the detection matrix and report it."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import threading
from contextlib import nullcontext, redirect_stdout
from pathlib import Path

from harness.analysis.calibration import short_run_warning
from harness.api import load_callable
from harness.config import GC_MODES
from harness.configure import duration_from, merge_budgets
from harness.errors import UsageError
from harness.history.db import check_writable, typical_seconds
from harness.parent.matrix import Cell, CheckOptions, cell_duration, plan, run_matrix
from harness.parent.shards import (
    INJECTED_SHARE,
    START_S,
    Shard,
    deal_all,
    expected_seconds,
    resolve_shard,
)
from harness.registry import load_scenario, scenario_names
from harness.runfiles.shard_plan import PlannedCell, ShardPlan, write_plan
from harness.suite import Suite, judge_suite
from harness.units import format_duration, parse_duration
from leak_harness.cli.base import check_target_spec, interrupts, target_import_hint
from leak_harness.cli.check_view import make_view
from leak_harness.cli.report_drawer import ReportDrawer
from leak_harness.cli.suite_out import publish_suite


class CheckCommand:
    """Run every scenario with the fixed code (must pass its budgets) and with each
    of its regressions injected (must fail), print the matrix with the time to detect
    each regression, write the run folders and a suite report, and exit 1 if any
    cell is wrong. Injected cells stop as soon as their verdict is certain.

    examples:
      leak-harness check                     # every scenario, fixed and injected
      leak-harness check -k mamba            # cells whose label contains 'mamba'
      leak-harness check --nightly --shard 2/4 --out results/nightly/shard-2
      leak-harness check --nightly --shard auto --plan   # this CI shard's cells, not run
    """

    name = "check"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add = parser.add_argument
        add("-k", dest="select", help="only cells whose 'scenario[cell]' label matches (a "
            "substring or glob; several, comma-separated: any of them)")
        add("--duration", help="duration of every cell (default: each scenario's)")
        add("--nightly", action="store_true",
            help="use each scenario's long default duration instead of its check duration")
        add("-j", "--jobs", type=int, default=1, help="cells run at once (default 1)")
        add("--shard", help="I/N: run only the I-th of N shards, cells dealt by expected "
                            "length so the shards end together; 'auto' reads I and N from the "
                            "CI (GitLab, Buildkite, a Kubernetes Indexed Job, or "
                            "LEAK_HARNESS_SHARD_INDEX and LEAK_HARNESS_SHARD_COUNT)")
        add("--plan", action="store_true",
            help="list the cells (of this shard with --shard) and the time each is expected "
                 "to take, from the history where it has them, then exit without running")
        add("--out", default="results/check", help="folder for run folders and the index")
        add("--seed", type=int, default=0, help="workload seed (default 0)")
        add("--gc-mode", choices=GC_MODES, help="override every scenario's GC mode")
        add("--target", help="cache factory module:callable to test instead of the defaults")
        add("--budget", action="append", default=[], metavar="BUDGET",
            help="override a budget in every cell, e.g. 'rss: 100 MB/h' or 'rss: off'")
        add("--history", default="results/history.sqlite",
            help="history database to append to (default results/history.sqlite)")
        add("--no-history", action="store_true", help="do not append to the history")
        add("--json", action="store_true",
            help="print the suite (each cell's verdict, whether it is right, its folder) on "
                 "stdout; the matrix and notes go to stderr")

    def run(self, args: argparse.Namespace) -> int:
        if args.jobs < 1:
            raise UsageError("-j must be at least 1.")
        # Everything a cell would refuse, refused once here before any worker starts.
        duration_s = None if args.duration is None else duration_from("--duration", args.duration)
        check_target_spec(args.target)
        merge_budgets((), args.budget, "--budget")
        scenarios = [load_scenario(name) for name in scenario_names()]
        cells = plan(scenarios, args.select)
        if not cells:
            raise UsageError(f"no cell matches -k {args.select!r} (see 'leak-harness list').")
        out = Path(args.out)
        options = CheckOptions(out=out, duration_s=duration_s, nightly=args.nightly,
                               seed=args.seed, gc_mode=args.gc_mode, jobs=args.jobs,
                               target=args.target, budgets=tuple(args.budget))
        history = self._history_times(args)
        total, shard = len(cells), None
        night: list[list[Cell]] = []
        if args.shard is not None:  # "" is refused, not taken for no shard
            shard = resolve_shard(args.shard)
            night = deal_all(cells, shard.count, options, history)
            cells = night[shard.index - 1]
            if not cells:  # more shards than cells: this machine has nothing to do
                print(f"{shard}: no cells ({total} cells over {shard.count} shards).",
                      file=sys.stderr if args.json else sys.stdout)
                if args.json:  # stdout carries the (empty) suite alone
                    print(json.dumps({"ok": True, "exit_code": 0, "cells": []}, indent=2))
                return 0
        cells, not_applicable = applicable_cells(cells, args.target)
        if args.plan:
            print_plan(cells, total, shard, options, history, not_applicable)
            return 0
        if not args.no_history:  # before the runs, not after them with the rows dropped
            try:
                check_writable(Path(args.history))
            except UsageError as exc:
                raise history_refused(exc) from None
        # What the whole night holds, for a merge to check: an unsharded check is its own
        # one shard, so a merge of its folder names the cells an interrupt never started.
        whole = shard or Shard(1, 1, "given")
        write_plan(out, night_plan(whole, night or [cells], args.target))
        # Which shard this machine resolved to and its cells, and how long they should
        # take, before anything runs.
        wall = format_duration(expected_wall(cells, options, history))
        head = (f"{shard}: {len(cells)} of {total} cells: {', '.join(c.label for c in cells)}"
                if shard is not None else f"{len(cells)} cell{'s' * (len(cells) != 1)}")
        print(f"{head}; expected about {wall} of wall time at -j {options.jobs} (--plan lists "
              "each cell's)", file=sys.stderr if args.json else sys.stdout, flush=True)
        # With --json stdout carries the suite alone; the matrix and notes go to stderr.
        with redirect_stdout(sys.stderr) if args.json else nullcontext():
            code, suite = self._run_cells(cells, options, args, not_applicable)
        if args.json:
            print(json.dumps(suite_json(suite, code), indent=2))
        return code

    @staticmethod
    def _history_times(args: argparse.Namespace) -> dict[tuple[str, str], float]:
        """Each cell's typical length from the history, for the time estimates; with
        --no-history a history that cannot be read only costs the estimates."""
        try:
            return typical_seconds(Path(args.history))
        except (UsageError, sqlite3.Error) as exc:
            if args.no_history:
                return {}
            raise history_refused(exc) from None

    def _run_cells(self, cells: list[Cell], options: CheckOptions, args: argparse.Namespace,
                   not_applicable: list[str]) -> tuple[int, Suite]:
        for sentence in not_applicable:
            print(sentence)
        warning = short_cells_warning(cells, options)
        if warning:  # an injected cell caught by growth alone would be WRONG: said first
            print(warning)
        cancel = threading.Event()
        with interrupts(cancel, raise_interrupt=False) as signals, make_view(cells) as view, \
                ReportDrawer(view) as drawer:
            results = run_matrix(cells, options, drawer, cancel)
            if drawer.waiting():
                print(f"reports: {drawer.waiting()} still being drawn ...", flush=True)
        ran = {r.cell.label for r in results}
        not_started = [f"{c.label}: not started (interrupted)" for c in cells if c.label not in ran]
        if not_started:
            print(f"interrupted: {len(not_started)} of {len(cells)} cells were not started; "
                  "the suite report lists them.")
        history = None if args.no_history else Path(args.history)
        # Judged from the summaries on disk, read once, by the rule the live table used.
        suite = judge_suite([r.outcome.rundir for r in results])
        # A night's history is its record (--nightly): one not written fails the night;
        # a local check keeps its exit code and says so.
        code = publish_suite(suite, options.out, history, args.target,
                             [*not_applicable, *not_started], history_required=args.nightly)
        return signals.exit_code(code), suite


def print_plan(cells: list[Cell], total: int, shard: Shard | None, options: CheckOptions,
               history: dict[tuple[str, str], float], not_applicable: list[str]) -> None:
    """The cells that would run, each with its expected length and where that comes from,
    and the expected wall time at ``-j``; nothing is run."""
    head = f"{shard}: " if shard is not None else ""
    print(f"plan: {head}{len(cells)} of {total} cells, -j {options.jobs} (nothing is run)")
    width = max((len(c.label) for c in cells), default=0)
    seconds = []
    for cell in cells:
        duration = cell_duration(cell, options)
        expect = expected_seconds(cell, duration, history)
        seconds.append(expect)
        if (cell.scenario.name, cell.name) in history:
            why = "the median of its recent runs in the history"
        elif cell.inject is None:
            why = f"its duration {format_duration(duration)} + {START_S:g}s start and analysis"
        else:
            why = (f"{INJECTED_SHARE:.0%} of its duration {format_duration(duration)} (it stops "
                   f"once its leak is certain) + {START_S:g}s")
        print(f"  {cell.label:<{width}}  {format_duration(expect):>7}  {why}")
    for sentence in not_applicable:
        print(f"  {sentence}")
    wall = expected_wall(cells, options, history)
    print(f"expected: {format_duration(sum(seconds))} of cells, about {format_duration(wall)} "
          f"of wall time at -j {options.jobs}, plus the suite report at the end.")


def expected_wall(cells: list[Cell], options: CheckOptions,
                  history: dict[tuple[str, str], float]) -> float:
    """Seconds the cells should take at ``-j``: their expected lengths shared over the
    jobs, never less than the longest (as ``--plan`` counts them)."""
    seconds = [expected_seconds(c, cell_duration(c, options), history) for c in cells]
    return max(sum(seconds) / options.jobs, max(seconds, default=0.0))


def night_plan(shard: Shard, night: list[list[Cell]], target: str | None) -> ShardPlan:
    """This shard's record of the night: every cell with the shard it was dealt to, but
    those the target declines (n/a: they never run anywhere)."""
    planned = []
    for index, cells in enumerate(night, start=1):
        runnable, _ = applicable_cells(cells, target)
        planned += [PlannedCell(c.scenario.name, c.name, index) for c in runnable]
    return ShardPlan(shard.index, shard.count, tuple(planned))


def short_cells_warning(cells: list[Cell], options: CheckOptions) -> str | None:
    """One line when some cell runs too short for memory growth to convict
    (:func:`harness.analysis.calibration.short_run_warning`), naming how many."""
    short = [(cell, warning) for cell in cells
             if (warning := short_run_warning(
                 cell_duration(cell, options), parse_duration(cell.scenario.warmup),
                 "--duration" if options.duration_s is not None
                 else f"{cell.scenario.name}'s check duration"))]
    if not short:
        return None
    first = short[0][1]
    return first if len(short) == 1 else f"{first} ({len(short)} of {len(cells)} cells)"


def suite_json(suite: Suite, code: int) -> dict[str, object]:
    """The suite as data: each cell's scenario, column, verdict, whether it is right,
    when it was detected and where its folder is; the exit code."""
    return {
        "ok": code == 0, "exit_code": code,
        "cells": [{"scenario": c.scenario, "column": c.column, "verdict": c.verdict,
                   "expected": c.expected, "correct": c.correct, "detect_s": c.detect_s,
                   "duration_s": c.duration_s, "reasons": list(c.reasons),
                   "rundir": str(c.rundir)} for c in suite.cells],
    }


def applicable_cells(cells: list[Cell], target: str | None) -> tuple[list[Cell], list[str]]:
    """The cells a target can run, and a sentence for each it cannot.

    A user's cache cannot take the reference cache's injected regressions unless
    its factory says which it implements (a ``regressions`` attribute), so the
    other injected cells are not run: they are n/a, never counted either way (a
    factory's ``no_regressions`` sentence says why it takes none, as the SGLang target
    does). A factory with a ``declines`` attribute (the scenario's cache options -> why it
    cannot run them, or None) makes the scenarios it declines n/a the same way.
    """
    if target is None:
        return cells, []
    try:
        factory = load_callable(target)
    except Exception as exc:  # the user's import: its words, one sentence
        raise UsageError(f"the target {target!r} cannot be loaded ({type(exc).__name__}: "
                         f"{exc}).{target_import_hint(exc, target)}") from None
    takes = set(getattr(factory, "regressions", ()))
    declines = getattr(factory, "declines", None)
    runnable, skipped = [], []
    for cell in cells:
        why = declines(cell.scenario.cache_options) if callable(declines) else None
        if why:
            skipped.append(f"{cell.label}: n/a (the target does not run this scenario: {why})")
        elif cell.inject is not None and cell.inject not in takes:
            skipped.append(f"{cell.label}: n/a ({_why_not_injected(factory, cell.inject)})")
        else:
            runnable.append(cell)
    return runnable, skipped


def _why_not_injected(factory: object, inject: str) -> str:
    """Why a target's injected cell is n/a: the factory's own sentence, else the rule."""
    own = getattr(factory, "no_regressions", None)
    if isinstance(own, str) and own:
        return own
    return (f"the target declares no regression {inject!r}; a factory lists those it "
            "implements in a 'regressions' attribute")


def history_refused(exc: Exception) -> UsageError:
    """The history's own sentence, and what to do about it."""
    said = exc.message if isinstance(exc, UsageError) else f"the history: {exc}"
    return UsageError(f"{said.rstrip('.')}; choose another --history or --no-history.")
