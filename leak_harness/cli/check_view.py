"""Progress of ``leak-harness check``: a live table on a terminal, plain lines in CI.

Runs report progress from their own threads (``-j N``), so the table state is
guarded by a lock; rich redraws it a few times a second.

Whether a landed cell is right is the suite's rule (:mod:`harness.suite`, through
:func:`harness.parent.matrix.judge_results`), the one ``check``'s exit code takes:
every landing judges all the landed cells again, so the last table is the
finished suite's judgement whatever order the cells landed in (``-j 2`` often
lands an injected cell before its scenario's fixed one). An injected cell that
ended as a process (crashed, hung, ceiling) while its fixed cell is still to
land reads ``ok?``: right so far, and wrong if the fixed run ends the same way.
When a landing changes what an earlier cell reads, the table redraws it, and the
plain lines say it again (``now ... WRONG: as fixed``).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from harness.parent.matrix import Cell, CellResult, judge_results
from harness.parent.supervisor import Snapshot
from harness.suite import CellOutcome
from harness.units import format_bytes
from harness.verdicts import detection_words

OK, PROVISIONAL, WRONG = "ok", "ok?", "WRONG"


class PlainView:
    """One line when a cell starts and one when it lands: what a CI log wants."""

    def __init__(self, cells: list[Cell]) -> None:
        self.cells = cells
        self.total = len(cells)
        self.done = 0
        self._lock = threading.Lock()
        self.results: dict[str, CellResult] = {}  # the landed cells, by label
        self.shown: dict[str, str] = {}  # what each landed cell's verdict reads
        self.marks: dict[str, str] = {}  # and its mark alone: ok, ok? or WRONG

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def started(self, cell: Cell) -> None:
        with self._lock:
            print(f"[{self.done}/{self.total}] {cell.label} ...", flush=True)

    def progress(self, cell: Cell, snap: Snapshot) -> None:
        return None

    def landed(self, result: CellResult) -> None:
        with self._lock:
            self.done += 1
            changed = self._judge(result)
            print(f"[{self.done}/{self.total}] {result.cell.label}: "
                  f"{self.shown[result.cell.label]}", flush=True)
            for label in changed:
                print(f"      {label}: now {self.shown[label]}", flush=True)

    def _judge(self, result: CellResult) -> list[str]:
        """Judge every landed cell again with ``result`` (under the lock); the labels of
        the earlier ones whose verdict now reads differently."""
        self.results[result.cell.label] = result
        suite = judge_results(self.results.values())
        changed = []
        for label, landed in self.results.items():
            judged = suite.cell_at(landed.outcome.rundir) or landed.judged()
            self.marks[label] = mark(judged, self._awaits_fixed(landed.cell))
            text = short(landed, self.marks[label])
            if label != result.cell.label and self.shown.get(label) != text:
                changed.append(label)
            self.shown[label] = text
        return changed

    def _awaits_fixed(self, cell: Cell) -> bool:
        """The fixed cell of ``cell``'s scenario is planned and has not landed yet."""
        return any(c.inject is None and c.scenario.name == cell.scenario.name
                   and c.label not in self.results for c in self.cells)


def mark(judged: CellOutcome, awaits_fixed: bool = False) -> str:
    """``ok``, ``WRONG`` (``WRONG: as fixed`` when it ended as its fixed run did) or
    ``ok?`` (right unless its fixed run, still to land, ends the same way)."""
    if not judged.correct:
        return f"{WRONG}: as fixed" if judged.same_as_fixed else WRONG
    return PROVISIONAL if awaits_fixed and judged.may_turn_wrong else OK


def short(result: CellResult, marked: str) -> str:
    """The verdict, its mark and when it was detected: ``leak (ok, detected at 2.9 s)``."""
    ttd = result.outcome.summary.time_to_detect_s
    words = detection_words(result.outcome.verdict)
    detect = f", {words} at {ttd:.1f} s" if ttd is not None else ""
    return f"{result.outcome.verdict} ({marked}{detect})"


STYLES = {OK: "green", PROVISIONAL: "yellow", WRONG: "bold red"}


class LiveView(PlainView):
    """A rich table that fits 80 columns: the scenario once per group, then one row per
    cell (``fixed`` or the injected regression) with its state, elapsed time (held at
    the duration while the run finishes), RSS and verdict."""

    def __init__(self, cells: list[Cell]) -> None:
        super().__init__(cells)
        self.rows: dict[str, list[str]] = {c.label: ["waiting", "", "", ""] for c in cells}
        self.styles: dict[str, str] = {}  # verdict colour per landed cell
        self._live: Any = None

    def __enter__(self) -> LiveView:
        from rich.live import Live

        self._live = Live(self._table(), refresh_per_second=4, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._table())
        self._live.__exit__(None, None, None)

    def _table(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"leak-harness check: {self.done}/{self.total} cells")
        for col in ("scenario", "cell", "state", "elapsed", "RSS", "verdict"):
            table.add_column(col, overflow="fold")
        shown = ""
        with self._lock:
            for cell in self.cells:
                # Text, not markup: labels and verdict lines hold '[fixed]'-style brackets.
                *plain, verdict = self.rows[cell.label]
                group = cell.scenario.name if cell.scenario.name != shown else ""
                shown = cell.scenario.name
                table.add_row(Text(group), Text(cell_name(cell)), *map(Text, plain),
                              Text(verdict, style=self.styles.get(cell.label, "")))
        return table

    def _set(self, cell: Cell, row: list[str]) -> None:
        with self._lock:
            self.rows[cell.label] = row
        self._live.update(self._table())

    def started(self, cell: Cell) -> None:
        self._set(cell, ["running", "", "", ""])

    def progress(self, cell: Cell, snap: Snapshot) -> None:
        rss = format_bytes(snap.rss) if snap.rss is not None else ""
        self._set(cell, [*elapsed(snap), rss, ""])

    def landed(self, result: CellResult) -> None:
        with self._lock:
            self.done += 1
            self._judge(result)
            row = self.rows[result.cell.label]
            self.rows[result.cell.label] = ["done", *row[1:3], ""]
            for label, text in self.shown.items():  # earlier cells may read differently now
                self.rows[label][3] = text
                self.styles[label] = STYLES[self.marks[label].split(":")[0]]
        self._live.update(self._table())


def cell_name(cell: Cell) -> str:
    """``fixed`` or the regression's name: the scenario is the group's first column."""
    return "fixed" if cell.inject is None else f"+{cell.inject}"


def elapsed(snap: Snapshot) -> tuple[str, str]:
    """State and elapsed time; past the duration the run is finishing (final windows,
    analysis), and the clock stops at the duration instead of counting past it."""
    if snap.total_s and snap.elapsed_s >= snap.total_s:
        return "finishing", f"{snap.total_s:g}/{snap.total_s:g} s"
    total = f"/{snap.total_s:g}" if snap.total_s else ""
    return snap.phase, f"{snap.elapsed_s:.0f}{total} s"


def make_view(cells: list[Cell]) -> PlainView:
    return LiveView(cells) if sys.stdout.isatty() else PlainView(cells)
