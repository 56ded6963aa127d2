"""One cell of the detection matrix: a run folder's place and whether it came out right.

Its own module so that the report (:mod:`reports.suite.report`) and the
outputs it renders (:mod:`reports.suite.outputs`) share it without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.verdicts import cell_correct


@dataclass(frozen=True)
class Cell:
    """One run's place in the matrix and whether it came out as expected."""

    scenario: str
    column: str  # "fixed" or "inject:<name>"
    verdict: str
    expected: str  # "pass", "fail" or an exact verdict
    rundir: Path
    duration_s: float
    detect_s: float | None
    reasons: tuple[str, ...]
    repeat: int = 1  # 2, 3, ... for further runs of the same cell (shards, reruns)
    same_as_fixed: bool = False  # a process ending the fixed run of the scenario shared
    signal: str = ""  # what convicted it, with its rate (or how many budgets held)
    culprit: str = ""  # the first line of "Where it grows"

    @property
    def correct(self) -> bool:
        if self.same_as_fixed:
            return False
        if self.expected in ("fail", "pass"):
            return cell_correct(self.expected == "fail", self.verdict)
        return self.verdict == self.expected  # an exact verdict asked for

    @property
    def name(self) -> str:
        """The JUnit test name: the column, numbered when a cell ran more than once."""
        return self.column if self.repeat == 1 else f"{self.column} (run {self.repeat})"

    @property
    def why_wrong(self) -> str:
        """What was expected instead, as a phrase; empty for a correct cell."""
        if self.correct:
            return ""
        if self.same_as_fixed:
            return f"the fixed run was {self.verdict} too: not a detection"
        return f"expected {'a failing verdict' if self.expected == 'fail' else self.expected}"
