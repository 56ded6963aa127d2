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
    outcome, mark = result.outcome, "ok" if result.correct else "WRONG"
    ttd = outcome.summary.time_to_detect_s
    detect = f", detected at {ttd:.1f} s" if ttd is not None else ""
    return f"{result.cell.label}: {outcome.verdict} ({mark}{detect})"


class LiveView(PlainView):
    """A rich table: one row per cell with elapsed time, ops/s, RSS and verdict."""

    def __init__(self, cells: list[Cell]) -> None:
        super().__init__(cells)
        self.cells = cells
        self.rows: dict[str, list[str]] = {c.label: ["waiting", "", "", "", ""] for c in cells}
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
        for col in ("cell", "state", "elapsed", "ops/s", "RSS", "verdict"):
            table.add_column(col)
        with self._lock:
            for label, row in self.rows.items():
                # Text, not markup: labels and verdict lines hold '[fixed]'-style brackets.
                *plain, verdict = row
                style = self.styles.get(label, "")
                table.add_row(Text(label), *map(Text, plain), Text(verdict, style=style))
        return table

    def _set(self, cell: Cell, row: list[str]) -> None:
        with self._lock:
            self.rows[cell.label] = row
        self._live.update(self._table())

    def started(self, cell: Cell) -> None:
        self._set(cell, ["running", "", "", "", ""])

    def progress(self, cell: Cell, snap: Snapshot) -> None:
        rss = format_bytes(snap.rss) if snap.rss is not None else ""
        total = f"/{snap.total_s:g}" if snap.total_s else ""
        self._set(cell, [snap.phase, f"{snap.elapsed_s:.0f}{total} s",
                         f"{snap.ops_per_s:,.0f}", rss, ""])

    def landed(self, result: CellResult) -> None:
        with self._lock:
            self.done += 1
            row = self.rows[result.cell.label]
        self.styles[result.cell.label] = "green" if result.correct else "bold red"
        self._set(result.cell, ["done", *row[1:4], line(result)])


def make_view(cells: list[Cell]) -> PlainView:
    return LiveView(cells) if sys.stdout.isatty() else PlainView(cells)
