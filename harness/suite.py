"""A suite of runs judged: the one rule for whether a cell of the detection matrix is right.

Rows are scenarios, columns ``fixed`` and each injected regression. A cell is
right when the fixed code passed and an injected regression got a failing
verdict (``leak``, ``crashed``, ``hung``, ``ceiling``): the harness caught it.
``suspicious`` is right for a fixed cell, as ``run`` exits 0 on it;
``suspicious`` and ``error`` are wrong for an injected cell, and ``error`` and
``interrupted`` are wrong in both columns, since neither tells a reader what
happened to the code under test. A run whose workload did not do what its
scenario exists for (nothing admitted, nothing decoded, an exit path never
taken: :mod:`harness.analysis.seen`) is ``error``, so such a cell is wrong in
either column, and a suite whose only wrong cells are ``error`` exits 3.

An injected run that ended the way its scenario's fixed run also ended
(both ``crashed``, say, because the scenario cannot even build) is not a
detection: such a cell is wrong, with that said, whatever the verdict's kind.

``expected`` overrides what a cell should be, by key ``"<scenario>/<column>"``,
``"<column>"`` or ``"<scenario>"`` (most specific wins); values ``"pass"``,
``"fail"`` (any failing verdict) or one exact verdict such as ``"crashed"``.

Everything that says whether a cell is right asks this module: ``check``'s live
table (through :mod:`harness.parent.matrix`), its exit code and ``--json``,
``report``'s exit code, and the suite report, which only renders the
:class:`Suite` it is given. Run folders may come from several shards: the
suite is just the list, wherever the folders are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.facts import FIXED, cell_of_folder, column, column_of, detect_s
from harness.runfiles.names import CONFIG_FILE
from harness.runfiles.shard_plan import Night
from harness.runfiles.summary import Summary, load_summary
from harness.verdicts import (
    ERROR,
    EXIT_HARNESS,
    EXIT_PASS,
    EXIT_REGRESSION,
    FAILING,
    PASSING,
    PROCESS_VERDICTS,
    VERDICTS,
)

PASS_EXPECTED, FAIL_EXPECTED = "pass", "fail"


@dataclass(frozen=True)
class CellOutcome:
    """One run's place in the matrix, what it should have been and what it was."""

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
    # The summary as read, for what the reports quote from it (None: unreadable).
    summary: Summary | None = field(default=None, compare=False, repr=False)

    @property
    def correct(self) -> bool:
        """The rule: see the module docstring."""
        if self.same_as_fixed:
            return False
        if self.expected == FAIL_EXPECTED:
            return self.verdict in FAILING
        if self.expected == PASS_EXPECTED:
            # A fixed cell that is ``suspicious`` is right, as ``run`` exits 0 on it: its
            # interval straddles the budget, which a short run of healthy code shows by
            # chance (RSS moves in pages); the suite report lists it for a longer run.
            return self.verdict in PASSING
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
        wanted = "a failing verdict" if self.expected == FAIL_EXPECTED else self.expected
        return f"expected {wanted}"

    @property
    def may_turn_wrong(self) -> bool:
        """Right now, but wrong if its scenario's fixed run, not judged yet, ends the same
        way: an injected cell that ended as a process (crashed, hung, ceiling)."""
        return self.correct and self.column != FIXED and self.verdict in PROCESS_VERDICTS


@dataclass(frozen=True)
class Suite:
    """The judged cells in matrix order, and the summaries as read, in the order given."""

    cells: tuple[CellOutcome, ...]
    runs: tuple[tuple[Path, Summary], ...] = ()  # readable runs: what the history appends

    @property
    def wrong(self) -> list[CellOutcome]:
        return [cell for cell in self.cells if not cell.correct]

    @property
    def ok(self) -> bool:
        return bool(self.cells) and not self.wrong

    def exit_code(self, flagged: bool = False) -> int:
        """0 every cell right and nothing ``flagged`` by the history; 3 when the only
        wrong cells are ``error`` (the harness could not judge them: a broken tool, not a
        regression); else 1 (an empty suite too)."""
        if self.ok and not flagged:
            return EXIT_PASS
        wrong = self.wrong
        if wrong and not flagged and all(cell.verdict == ERROR for cell in wrong):
            return EXIT_HARNESS
        return EXIT_REGRESSION

    def cell_at(self, rundir: Path) -> CellOutcome | None:
        """The cell of a run folder (the first, should one folder be listed twice)."""
        return next((cell for cell in self.cells if cell.rundir == rundir), None)


def judge_suite(rundirs: Sequence[Path], expected: Mapping[str, str] | None = None) -> Suite:
    """Read each run folder's summary once and judge the suite.

    A folder without a readable summary is an ``error`` cell named from its config.
    Raises ``ValueError`` for an ``expected`` value that is not pass, fail or a verdict.
    """
    expected = expected or {}
    check_expected(expected)
    return judge_cells([read_cell(Path(rundir), expected) for rundir in rundirs])


def build_cells(rundirs: Sequence[Path], expected: Mapping[str, str]) -> list[CellOutcome]:
    """One judged cell per run folder, in matrix order; repeated cells are numbered."""
    return list(judge_suite(rundirs, expected).cells)


def judge_cells(cells: Iterable[CellOutcome]) -> Suite:
    """Judge cells read one by one (:func:`cell_outcome`, :func:`read_cell`) as a suite:
    repeated cells numbered in the order given, the injected cells that ended as their
    fixed run did marked, matrix order. Judging cells already judged gives the same."""
    given = list(cells)
    seen: dict[tuple[str, str], int] = {}
    numbered = []
    for cell in given:
        key = (cell.scenario, cell.column)
        seen[key] = seen.get(key, 0) + 1
        numbered.append(replace(cell, repeat=seen[key]))
    judged = mark_same_as_fixed(numbered)
    runs = tuple((c.rundir, c.summary) for c in given if c.summary is not None)
    return Suite(tuple(sorted(judged, key=matrix_order)), runs)


def matrix_order(cell: CellOutcome) -> tuple[str, bool, str, int]:
    return (cell.scenario, cell.column != FIXED, cell.column, cell.repeat)


def mark_same_as_fixed(cells: Sequence[CellOutcome]) -> list[CellOutcome]:
    """Injected cells whose process ending (crashed, hung, ...) a fixed run of their
    scenario shared are marked; the others are not."""
    fixed = {(c.scenario, c.verdict) for c in cells if c.column == FIXED}
    return [replace(c, same_as_fixed=c.column != FIXED and c.verdict in PROCESS_VERDICTS
                    and (c.scenario, c.verdict) in fixed) for c in cells]


def check_expected(expected: Mapping[str, str]) -> None:
    for value in expected.values():
        if value not in (PASS_EXPECTED, FAIL_EXPECTED, *VERDICTS):
            raise ValueError(f"expected outcome {value!r}: use pass, fail or one verdict.")


def expectation(scenario: str, where: str, expected: Mapping[str, str]) -> str:
    """What the cell should be: an override (see the module docstring) or the default."""
    for key in (f"{scenario}/{where}", where, scenario):
        if key in expected:
            return expected[key]
    return PASS_EXPECTED if where == FIXED else FAIL_EXPECTED


def cell_outcome(rundir: Path, summary: Summary,
                 expected: Mapping[str, str] | None = None) -> CellOutcome:
    """One run as a cell, on its own: not yet compared with its scenario's fixed run
    (:func:`judge_cells` does that)."""
    name, where = summary.scenario, column(summary)
    return CellOutcome(
        scenario=name, column=where, verdict=summary.verdict,
        expected=expectation(name, where, expected or {}), rundir=rundir,
        duration_s=summary.duration_s, detect_s=detect_s(summary),
        reasons=tuple(summary.reasons), summary=summary,
    )


def read_cell(rundir: Path, expected: Mapping[str, str] | None = None) -> CellOutcome:
    """A run folder as a cell, its summary read once; unreadable, an ``error`` cell."""
    try:
        summary = load_summary(rundir)
    except UsageError as exc:
        return _unreadable(rundir, exc.message, expected or {})
    return cell_outcome(rundir, summary, expected)


def _unreadable(rundir: Path, why: str, expected: Mapping[str, str]) -> CellOutcome:
    """A run folder without a readable summary: an error cell, named from its config, or
    from where ``check`` put it (``<scenario>/fixed``, ``<scenario>/inject-<name>``) when
    the config is gone too (a folder removed while its report was drawn)."""
    try:
        config = json.loads((rundir / CONFIG_FILE).read_text(encoding="utf-8"))
        name, where = str(config["scenario"]), column_of([str(x) for x in
                                                          config.get("inject", [])])
    except (OSError, ValueError, KeyError, TypeError):
        name, where = cell_of_folder(rundir)
    if not rundir.is_dir():
        why = f"the run folder {rundir} is missing (removed after the run?)"
    return CellOutcome(name, where, ERROR, expectation(name, where, expected), rundir, 0.0,
                       None, (f"no usable summary: {why}",))


def with_absent(suite: Suite, night: Night | None,
                expected: Mapping[str, str] | None = None) -> tuple[Suite, list[str]]:
    """The suite with an ``error`` cell for each cell the night planned and no run folder
    holds (:mod:`harness.runfiles.shard_plan`), and a sentence per shard that left no
    plan: a merge that lost a shard is not "all as expected"."""
    if night is None:
        return suite, []
    ran = {(cell.scenario, cell.column) for cell in suite.cells}
    absent = [c for c in night.cells if (c.scenario, c.column) not in ran]
    cells = []
    for planned in absent:
        lost = planned.shard in night.missing_shards
        where = night.where.get(planned.shard, Path(f"shard-{planned.shard}-of-{night.count}"))
        why = (f"no run folder: {night.shard_of(planned)} left no plan and no run (its "
               "folder is missing or empty: did the shard upload nothing?)" if lost else
               f"no run folder: {night.shard_of(planned)} planned it and left no run of it "
               "(cut short, or the folder was removed)")
        cells.append(CellOutcome(planned.scenario, planned.column, ERROR,
                                 expectation(planned.scenario, planned.column, expected or {}),
                                 where / planned.folder, 0.0, None, (why,)))
    said = [f"shard {i} of {night.count} is missing: no plan and no run folder of it "
            f"({sum(c.shard == i for c in night.cells)} cells)" for i in night.missing_shards]
    if absent:
        said.append(f"{len(absent)} of {len(night.cells)} planned cells have no run: "
                    f"{', '.join(c.label for c in absent)}")
    return (judge_cells([*suite.cells, *cells]) if cells else suite), said
