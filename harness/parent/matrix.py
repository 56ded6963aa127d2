"""The detection matrix: every scenario fixed, and with each of its regressions.

A cell is right when the fixed code passes its budgets and an injected
regression gets a failing verdict, other than a process ending its fixed run
shared: the rule is :mod:`harness.suite`'s, asked through :func:`judge_results`.
Injected cells stop as soon as the verdict is certain (the analysis of the
samples so far already says ``leak``; a crash or a hang ends the run by
itself), which is what keeps the whole matrix within minutes; fixed cells run
their full duration, since a pass is never certain early. Cells run one worker
each, ``jobs`` at a time.
"""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from threading import Event
from typing import Protocol

from harness.analysis.summary import summarize
from harness.api import Scenario
from harness.config import RunConfig
from harness.configure import scenario_config
from harness.errors import UsageError
from harness.parent import folder_lock
from harness.parent.runner import RunOutcome, run
from harness.parent.supervisor import Snapshot
from harness.runfiles.facts import cell_folder
from harness.runfiles.names import LOCK_FILE, SAMPLES_FILE
from harness.runfiles.rundata import RunData
from harness.suite import CellOutcome, Suite, cell_outcome, judge_cells
from harness.units import parse_duration

MIN_SAMPLES_TO_STOP = 20  # never stop on the first second of samples


@dataclass(frozen=True)
class Cell:
    scenario: Scenario
    inject: str | None  # None: the fixed code

    @property
    def name(self) -> str:
        return "fixed" if self.inject is None else f"inject:{self.inject}"

    @property
    def label(self) -> str:
        return f"{self.scenario.name}[{self.name}]"


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    outcome: RunOutcome

    def judged(self) -> CellOutcome:
        """This run under the suite's rule, on its own: whether its scenario's fixed run
        ended the same way is :func:`judge_results`' to say."""
        return cell_outcome(self.outcome.rundir, self.outcome.summary)


def judge_results(results: Iterable[CellResult]) -> Suite:
    """The landed cells judged together, as the exit code judges the finished suite
    (:func:`harness.suite.judge_cells`): what ``check``'s live table shows."""
    return judge_cells(result.judged() for result in results)


@dataclass(frozen=True)
class CheckOptions:
    out: Path
    duration_s: float | None = None  # None: each scenario's check (or nightly) duration
    nightly: bool = False
    seed: int = 0
    gc_mode: str | None = None
    jobs: int = 1
    target: str | None = None
    budgets: tuple[str, ...] = ()


def plan(scenarios: Sequence[Scenario], select: str | None = None) -> list[Cell]:
    """The cells to run: ``select`` is a substring of a ``scenario[cell]`` label or a
    glob over them (``-k 'mamba*'``), or several, comma-separated (``-k 'pd-*,*-spec*'``:
    a cell any of them selects); a label copied from the output selects its cell even
    though its brackets read as a glob character class (labels hold no comma). Spreading
    them over machines is :mod:`harness.parent.shards`'."""
    cells = [Cell(s, inj) for s in scenarios for inj in (None, *s.regressions)]
    if select:
        chosen = [part for part in select.split(",") if part]
        cells = [c for c in cells if any(selects(part, c.label) for part in chosen)]
    return cells


def selects(select: str, label: str) -> bool:
    """Whether one ``-k`` pattern selects a cell's label (a substring, or a glob)."""
    pattern = select if any(c in select for c in "*?[") else f"*{select}*"
    return select in label or fnmatch.fnmatchcase(label, pattern)


def cell_duration(cell: Cell, options: CheckOptions) -> float:
    """Seconds of workload: ``--duration``, else the scenario's check (or nightly) length."""
    if options.duration_s is not None:
        return options.duration_s
    scenario = cell.scenario
    return parse_duration(scenario.default_duration if options.nightly
                          else scenario.check_duration)


def cell_config(cell: Cell, options: CheckOptions) -> RunConfig:
    scenario = cell.scenario
    return scenario_config(
        scenario,
        options.out / cell_folder(scenario.name, cell.name),
        duration_s=cell_duration(cell, options),
        inject=() if cell.inject is None else (cell.inject,),
        seed=options.seed,
        target=options.target,
        gc_mode=options.gc_mode,
        budgets=options.budgets,
        budgets_from="--budget",
    )


def stop_when_certain(config: RunConfig) -> Callable[[RunData], bool]:
    """Stop once the samples so far already give ``leak`` (injected cells only)."""

    def certain(data: RunData) -> bool:
        if len(data.rss) < MIN_SAMPLES_TO_STOP:
            return False
        # The final verdict's skippable budgets too: a gauge published only with an
        # optional call (stale_request_entries) must not switch the early stop off.
        verdict = summarize(data, config.budgets, config.warmup_s,
                            skippable=config.skippable_budgets).verdict
        return verdict == "leak"

    return certain


class Observer(Protocol):
    """What the check command's view is told while the matrix runs."""

    def started(self, cell: Cell) -> None: ...

    def progress(self, cell: Cell, snap: Snapshot) -> None: ...

    def landed(self, result: CellResult) -> None: ...


def clear_previous_run(rundir: Path) -> None:
    """Empty a cell's folder that holds an earlier check's run, keeping its lock.

    The folder is the cell's own (``<out>/<scenario>/<cell>``), so a second
    ``make leak-check`` replaces its last result instead of refusing it (exit 2)
    as ``run --out`` refuses a folder with a run. Under the folder's lock: a run
    still writing there is refused as before; the cell's run then takes the lock
    this process holds and releases it when it ends.
    """
    if not (rundir / SAMPLES_FILE).exists():
        return
    folder_lock.claim(rundir)
    for entry in rundir.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def run_cell(
    cell: Cell, options: CheckOptions, observer: Observer | None = None, cancel: Event | None = None
) -> CellResult:
    config = cell_config(cell, options)
    clear_previous_run(config.path)
    # Fixed cells pass no predicate, so the parent keeps no samples in memory for them.
    stop = None if cell.inject is None else stop_when_certain(config)

    def progress(snap: Snapshot) -> None:
        if observer is not None:
            observer.progress(cell, snap)

    if observer is not None:
        observer.started(cell)
    # Ctrl-C reaches only the main thread; runs on other threads see it through ``cancel``.
    result = CellResult(cell, run(config, stop_when=stop, on_progress=progress, cancel=cancel))
    if observer is not None:
        observer.landed(result)  # the report drawer takes the samples the run parsed
    # The matrix keeps every cell's outcome until the suite is judged: not its samples
    # (a night's cell is close to a million lines).
    return replace(result, outcome=replace(result.outcome, samples=None))


def run_matrix(
    cells: Sequence[Cell], options: CheckOptions, observer: Observer | None = None,
    cancel: Event | None = None,
) -> list[CellResult]:
    """Run every cell (``options.jobs`` workers at a time); results in plan order.

    Setting ``cancel`` (the check command's SIGINT/SIGTERM handler does) stops the
    running cells, which are still analysed and land as ``interrupted``; cells
    not started by then are left out. A refused cell (a UsageError: every cell
    would be refused) stops the others and is raised."""
    cancel = cancel or Event()

    def unless_cancelled(cell: Cell) -> CellResult | None:
        return None if cancel.is_set() else run_cell(cell, options, observer, cancel)

    if options.jobs <= 1:
        return [r for r in map(unless_cancelled, cells) if r is not None]
    with ThreadPoolExecutor(max_workers=options.jobs) as pool:
        futures = [pool.submit(unless_cancelled, cell) for cell in cells]
        try:
            return [r for r in (f.result() for f in futures) if r is not None]
        except (KeyboardInterrupt, UsageError):
            cancel.set()
            for f in futures:
                f.cancel()
            raise
