"""Progress of ``leak-harness check``: a live table on a terminal, plain lines in CI.

Runs report progress from their own threads (``-j N``), so the table state is
guarded by a lock; rich redraws it a few times a second.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from harness.parent.matrix import Cell, CellResult
from harness.parent.supervisor import Snapshot
from harness.units import format_bytes


class PlainView:
    """One line when a cell starts and one when it lands: what a CI log wants."""

    def __init__(self, cells: list[Cell]) -> None:
        self.total = len(cells)
        self.done = 0
        self._lock = threading.Lock()

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
            print(f"[{self.done}/{self.total}] {line(result)}", flush=True)


def line(result: CellResult) -> str:
    return f"{result.cell.label}: {short(result)}"


def short(result: CellResult) -> str:
    """The verdict, whether it is right and when it was detected: ``leak (ok, 2.9 s)``."""
    outcome, mark = result.outcome, "ok" if result.correct else "WRONG"
    ttd = outcome.summary.time_to_detect_s
    detect = f", detected at {ttd:.1f} s" if ttd is not None else ""
    return f"{outcome.verdict} ({mark}{detect})"


class LiveView(PlainView):
    """A rich table that fits 80 columns: the scenario once per group, then one row per
    cell (``fixed`` or the injected regression) with its state, elapsed time (held at
    the duration while the run finishes), RSS and verdict."""

    def __init__(self, cells: list[Cell]) -> None:
        super().__init__(cells)
        self.cells = cells
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
            row = self.rows[result.cell.label]
        self.styles[result.cell.label] = "green" if result.correct else "bold red"
        self._set(result.cell, ["done", *row[1:3], short(result)])


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
