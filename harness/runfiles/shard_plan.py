"""What a sharded night planned: written by each shard, read by the merge.

``check --shard I/N`` writes ``shard-plan.json`` into its output folder before
its first cell runs: which shard it is, how many there are, and every cell of
the night with the shard it was dealt to (the cells a target declines are not
planned: they never run). A merge that reads the shards' folders then knows
what the night should hold, so a shard that uploaded nothing, or a cell whose
run folder is missing, is named instead of merging as "all as expected"
(:func:`harness.suite.with_absent`). Each shard records the whole night, so one
surviving shard is enough to say what the others should have run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.runfiles.facts import cell_folder

PLAN_FILE = "shard-plan.json"
SCHEMA = "leak-harness/shard-plan"
VERSION = 1


@dataclass(frozen=True)
class PlannedCell:
    scenario: str
    column: str  # "fixed" or "inject:<name>"
    shard: int  # 1-based

    @property
    def folder(self) -> str:
        """Its run folder under the shard's output folder (as ``check`` names it)."""
        return cell_folder(self.scenario, self.column)

    @property
    def label(self) -> str:
        return f"{self.scenario}[{self.column}]"


@dataclass(frozen=True)
class ShardPlan:
    """One shard's record of the night: its index, the count, every cell's shard."""

    shard: int
    count: int
    cells: tuple[PlannedCell, ...]
    where: Path = Path(".")  # the shard's output folder (where the file was found)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": VERSION, "shard": self.shard, "count": self.count,
                "cells": [{"scenario": c.scenario, "column": c.column, "shard": c.shard}
                          for c in self.cells]}


def write_plan(out: Path, plan: ShardPlan) -> Path:
    """``shard-plan.json`` in ``out`` (created); a UsageError if it cannot be written."""
    path = out / PLAN_FILE
    try:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(plan.to_json(), indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the shard's plan {path}: {exc.strerror}.") from None
    return path


def read_plan(path: Path) -> ShardPlan:
    """A plan file; a UsageError naming it if it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA or data.get("version") != VERSION:
            raise ValueError(f"not a {SCHEMA} version {VERSION} file")
        cells = tuple(PlannedCell(str(c["scenario"]), str(c["column"]), int(c["shard"]))
                      for c in data["cells"])
        return ShardPlan(int(data["shard"]), int(data["count"]), cells, path.parent)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} is not a shard plan ({exc}).") from None


def find_plans(paths: Iterable[Path]) -> list[ShardPlan]:
    """Every shard plan at or below the given folders."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(path.rglob(PLAN_FILE))
    return [read_plan(p) for p in dict.fromkeys(found)]


@dataclass(frozen=True)
class Night:
    """What the plans say the night should hold, and which shards left no plan."""

    count: int
    cells: tuple[PlannedCell, ...]  # every planned cell, once
    missing_shards: tuple[int, ...]  # shards no plan was found for
    where: dict[int, Path]  # the output folder of each shard that left a plan

    def shard_of(self, cell: PlannedCell) -> str:
        return f"shard {cell.shard} of {self.count}"


def night_of(plans: Sequence[ShardPlan]) -> Night | None:
    """The night the plans describe (None without plans). Plans of different counts
    are two nights: a UsageError, since no merge of them is whole."""
    if not plans:
        return None
    counts = sorted({p.count for p in plans})
    if len(counts) > 1:
        raise UsageError(f"the shard plans found are of nights of {' and '.join(map(str, counts))}"
                         f" shards ({', '.join(str(p.where) for p in plans)}): merge one night "
                         "at a time.")
    cells = tuple(dict.fromkeys(c for p in plans for c in p.cells))
    present = {p.shard for p in plans}
    return Night(counts[0], cells, tuple(i for i in range(1, counts[0] + 1) if i not in present),
                 {p.shard: p.where for p in plans})
