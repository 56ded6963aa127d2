"""What a comparison is made of: the two sides, each a run folder as loaded.

Its own module so that the page (:mod:`reports.compare.report`) and the plot
(:mod:`reports.compare.plot`) both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.runfiles.facts import Growth
from harness.runfiles.rundata import RunData
from harness.runfiles.summary import Summary


@dataclass(frozen=True)
class Side:
    """One of the two runs."""

    label: str
    rundir: Path
    summary: Summary
    run: RunData | None
    growth: Growth | None  # judged growth per hour of the compared series
