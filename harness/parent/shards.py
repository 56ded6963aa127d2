"""Cells dealt to shards by how long they take, so the shards end together.

A matrix of machines is as slow as its slowest shard. Dealing cells out by
position gave one shard the long fixed runs and another the injected cells that
stop within seconds, so cells are dealt by expected length instead: longest
first, each to the shard with the least work so far (the LPT rule, within 4/3 of
the best split). The expected length of a cell is the median of its recent runs
in the history when it has them, else what the plan says: a fixed cell runs its
whole duration, an injected one stops once its leak is certain (a quarter of the
duration, until the history knows better). The same cells, durations and count
give the same shards on every machine: ties go by label.

``--shard auto`` reads the index and count from the CI's own variables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.errors import UsageError
from harness.parent.matrix import Cell, CheckOptions, cell_duration

INJECTED_SHARE = 0.25  # of its duration, an injected cell's expected length without history
START_S = 5.0  # a worker's start-up and the analysis after: every cell pays it
# CI variables: (index variable, count variable, whether the index counts from 0)
CI_SHARD_VARIABLES = (
    ("LEAK_HARNESS_SHARD_INDEX", "LEAK_HARNESS_SHARD_COUNT", False),  # any CI, 1-based
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", False),  # GitLab's parallel jobs
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", True),
    ("JOB_COMPLETION_INDEX", "LEAK_HARNESS_SHARD_COUNT", True),  # a Kubernetes Indexed Job
)


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` as (index, count), index counted from 1."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"a shard is 'I/N' such as 1/4, got {text!r}.") from None
    if not 1 <= index <= count:
        raise UsageError(f"shard {text!r} is out of range: I must be between 1 and N.")
    return index, count


def shard_from_environment(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(index, count)``, 1-based, from the first CI's variables that are set."""
    found = resolve_shard("auto", env)
    return found.index, found.count


@dataclass(frozen=True)
class Shard:
    """The shard this machine runs, 1-based, and where it came from (said at start)."""

    index: int
    count: int
    source: str  # "given" or "CI_NODE_INDEX=2 counted from 1, CI_NODE_TOTAL=4"

    def __str__(self) -> str:
        return f"shard {self.index}/{self.count}" + (
            "" if self.source == "given" else f" (from {self.source})")


def resolve_shard(shard: str, env: Mapping[str, str] | None = None) -> Shard:
    """``shard`` (``I/N`` or ``auto``) as a :class:`Shard`: ``auto`` reads the CI's
    variables, each pair counted from where its CI counts (0 or 1); several pairs set
    must name the same shard. An empty ``shard`` (``--shard "$SHARD"`` with the
    variable unset) is refused: run unsharded, every machine would run every cell."""
    if not shard.strip():
        raise UsageError("--shard is empty (an unset variable in --shard \"$SHARD\"?): give "
                         "I/N such as 1/4, or auto to read the CI's variables; leave the flag "
                         "out to run every cell.")
    if shard != "auto":
        return Shard(*parse_shard(shard), "given")
    env = os.environ if env is None else env
    found = [ci_shard(index_name, count_name, from_zero, env)
             for index_name, count_name, from_zero in CI_SHARD_VARIABLES
             if index_name in env and count_name in env]
    if not found:
        names = ", ".join(f"{i} and {c}" for i, c, _ in CI_SHARD_VARIABLES)
        raise UsageError(f"--shard auto: none of these variable pairs is set: {names}.")
    if len({(s.index, s.count) for s in found}) > 1:
        # A pod spec that sets LEAK_HARNESS_SHARD_INDEX beside an Indexed Job's own index
        # would run the same shard on every pod: no pair is taken over another.
        said = "; ".join(f"{s.source} says {s.index}/{s.count}" for s in found)
        raise UsageError(f"--shard auto: the CI variables disagree ({said}); unset all but "
                         "one pair, or give --shard I/N.")
    return found[0]


def ci_shard(index_name: str, count_name: str, from_zero: bool,
             env: Mapping[str, str]) -> Shard:
    """The shard one CI's pair of variables names, 1-based; a UsageError naming them."""
    text = f"{env[index_name]}/{env[count_name]}"
    base = 0 if from_zero else 1
    source = (f"{index_name}={env[index_name]} counted from {base}, "
              f"{count_name}={env[count_name]}")
    try:
        index, count = int(env[index_name]) + from_zero, int(env[count_name])
    except ValueError:
        raise UsageError(f"--shard auto: {index_name}/{count_name} is {text!r}, "
                         "not two whole numbers.") from None
    if not 1 <= index <= count:
        raise UsageError(f"--shard auto: {source} is out of range: {index_name} "
                         f"counts from {base}, so it must be {base} to "
                         f"{count - 1 + base}.")
    return Shard(index, count, source)


def expected_seconds(
    cell: Cell, duration_s: float, history: Mapping[tuple[str, str], float]
) -> float:
    """How long ``cell`` is expected to take: its history's typical length, else the plan's."""
    known = history.get((cell.scenario.name, cell.name))
    if known is not None:
        return known
    return START_S + (duration_s if cell.inject is None else INJECTED_SHARE * duration_s)


def deal(cells: Sequence[Cell], count: int, seconds: Callable[[Cell], float]) -> list[list[Cell]]:
    """``count`` shards, longest cells first, each to the least loaded shard; every
    shard then in plan order (the order the cells print in)."""
    order = {cell.label: i for i, cell in enumerate(cells)}
    shards: list[list[Cell]] = [[] for _ in range(count)]
    load = [0.0] * count
    for cell in sorted(cells, key=lambda c: (-seconds(c), c.label)):
        lightest = min(range(count), key=lambda i: (load[i], i))
        shards[lightest].append(cell)
        load[lightest] += seconds(cell)
    return [sorted(shard, key=lambda c: order[c.label]) for shard in shards]


def pick_shard(cells: Sequence[Cell], shard: str, options: CheckOptions,
               history: Mapping[tuple[str, str], float]) -> list[Cell]:
    """This machine's cells: ``shard`` is ``I/N`` or ``auto`` (the CI's variables)."""
    return deal_shard(cells, resolve_shard(shard), options, history)


def deal_shard(cells: Sequence[Cell], shard: Shard, options: CheckOptions,
               history: Mapping[tuple[str, str], float]) -> list[Cell]:
    """The cells dealt to ``shard``."""
    return deal_all(cells, shard.count, options, history)[shard.index - 1]


def deal_all(cells: Sequence[Cell], count: int, options: CheckOptions,
             history: Mapping[tuple[str, str], float]) -> list[list[Cell]]:
    """Every shard's cells (the night each shard records for the merge)."""
    return deal(cells, count, lambda c: expected_seconds(c, cell_duration(c, options), history))
