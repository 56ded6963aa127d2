"""Run reports drawn while the other cells of a check still run.

Drawing a report takes a few seconds of CPU (matplotlib); a suite of 32 cells
spent its last 85 s drawing them one after another, after every cell had
finished. Here each cell's report is drawn as soon as the cell lands, in one
separate process at the lowest priority, so the cells still running keep the
CPU and ``check`` ends within seconds of its last cell. A report that fails
here is drawn again by the suite report, which writes every missing one.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from types import TracebackType

from harness.parent.matrix import Cell, CellResult
from harness.parent.supervisor import Snapshot
from harness.runfiles.names import REPORT_FILE, SAMPLES_FILE
from harness.runfiles.reader import LoadedRun, open_samples
from harness.runfiles.summary import Summary
from harness.suite import Suite
from leak_harness.cli.base import write_report
from leak_harness.cli.check_view import PlainView

LOWEST_PRIORITY = 19
MIN_PARALLEL_REPORTS = 6  # fewer are drawn in this process: starting workers costs ~2 s


def draw(loaded: LoadedRun) -> bool:
    """Write one run's report; False when it could not (the suite retries it)."""
    try:
        write_report(loaded)
    except Exception:
        return False
    return True


def draw_missing_reports(suite: Suite) -> None:
    """Each missing run report of a judged cell, so every cell of the index links
    somewhere: from the summary the suite already read, on every core (the cells are
    done, the machine is free; 30 cells took 85 s one after another). Each drawing
    reads its own samples, so no two of them are held at once."""
    missing = [(cell.rundir, cell.summary) for cell in suite.cells
               if cell.summary is not None and not (cell.rundir / REPORT_FILE).exists()]
    workers = min(len(missing), os.cpu_count() or 1)
    if workers <= 1 or len(missing) < MIN_PARALLEL_REPORTS:
        for rundir, summary in missing:
            draw_from(rundir, summary)
        return
    # spawn, not fork: the parent may still hold threads (the matrix's pool, a live view)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        list(pool.map(draw_from, *zip(*missing, strict=True)))


def draw_from(rundir: Path, summary: Summary) -> bool:
    """A run's report from the summary already read and its samples, read here."""
    return draw(LoadedRun(rundir, summary, *open_samples(rundir / SAMPLES_FILE)))


class ReportDrawer:
    """The check's observer: passes every event to ``view``, and draws each landed
    cell's report in the background."""

    def __init__(self, view: PlainView) -> None:
        self.view = view
        self.pending: list[Future[bool]] = []
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> ReportDrawer:
        # spawn, not fork: the parent holds threads (the matrix's pool, the live view).
        self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"),
                                         initializer=os.nice, initargs=(LOWEST_PRIORITY,))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._pool is not None:
            # Interrupted: what is not drawn yet is left to the suite report.
            self._pool.shutdown(wait=kind is None, cancel_futures=kind is not None)

    def started(self, cell: Cell) -> None:
        self.view.started(cell)

    def progress(self, cell: Cell, snap: Snapshot) -> None:
        self.view.progress(cell, snap)

    def landed(self, result: CellResult) -> None:
        self.view.landed(result)
        if self._pool is not None:
            self.pending.append(self._pool.submit(draw, result.outcome.loaded))

    def waiting(self) -> int:
        """Reports still being drawn."""
        return sum(not f.done() for f in self.pending)
