"""What the suite report quotes of each cell beyond the judgement, and the files it wrote.

The cells come judged (:class:`harness.suite.CellOutcome` in a
:class:`harness.suite.Suite`); here are only the phrases the index words from
each cell's summary, already read. Its own module so that the report
(:mod:`reports.suite.report`) and the outputs it renders
(:mod:`reports.suite.outputs`) share it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.suite import CellOutcome
from reports.render.judged import convicting_signal


@dataclass(frozen=True)
class SuitePaths:
    """The three files of a suite report."""

    index: Path
    junit: Path
    summary: Path  # the text summary, as printed


def cell_signal(cell: CellOutcome) -> str:
    """What convicted the cell, with its rate (or how many budgets held); empty when
    its summary could not be read."""
    return convicting_signal(cell.summary) if cell.summary is not None else ""


def cell_culprit(cell: CellOutcome) -> str:
    """The first line of "Where it grows", or empty."""
    return next(iter(cell.summary.where_it_grows()), "") if cell.summary is not None else ""
