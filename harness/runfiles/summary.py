"""``summary.json``: the verdict of one run, typed, versioned, decoded from every version.

Version history of ``leak-harness/summary``:

- 1: verdict, reasons, metrics with units, time to detect, duration, ops and
  the command that reproduces the run; free-form facts under ``extra``.
- 2: also the fitted line of each judged series (``extra.analysis.series``).
- 3: also what the run page shows, so reports render without analysing: each
  budget parsed (``extra.analysis.limits``), garbage by type and the
  aggregated reference cycles.
- 4: the same facts as typed records (:mod:`harness.runfiles.summary_records`):
  the run's own facts under ``run`` (rundir, ending, exit code, the budgets
  judged, the measured window) and the analysis under ``analysis`` (judged
  budgets, per-series details with the fitted line, limits, garbage by type,
  object growth, cycles, "Where it grows"). No free-form part is left.

:func:`load_summary` decodes every readable version into version 4 in one
place, moving data and never recomputing it: a field an older version lacks
is missing (``None``), and readers show it as missing. An old run is judged
again only when asked (``leak-harness report --reanalyse``), which re-runs the
analysis on its samples and rewrites the file. Versions this code does not
know are refused.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness.errors import UsageError
from harness.runfiles.names import SUMMARY_FILE
from harness.runfiles.summary_records import (
    JSON,
    BudgetJudgement,
    CycleRow,
    Finding,
    FittedLine,
    GarbageRow,
    GrowthRow,
    Limit,
    Metric,
    SeriesDetail,
    integer,
    mapping,
    number,
    optional_number,
    optional_text,
    pair,
    sequence,
    text,
)
from harness.verdicts import EXIT_HARNESS, VERDICTS

T = TypeVar("T")

SUMMARY_SCHEMA = "leak-harness/summary"
SUMMARY_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)


@dataclass(frozen=True)
class RunFacts:
    """Facts of the run itself, beside its verdict (None: the file's version lacks it)."""

    rundir: str | None = None
    ending: str | None = None  # how the process ended: finished, crashed, interrupted, ...
    exit_code: int | None = None
    budgets: tuple[str, ...] | None = None  # the budgets judged, after the overrides
    window_s: tuple[float, float] | None = None  # measured: after warm-up to last sample
    # The code under test when it is not the reference: ``--target`` as given, and what
    # the target says it runs (a built-in target's ``describe()``: "SGLang 0.5.23 from ...").
    target: str | None = None
    target_code: str | None = None

    def to_json(self) -> JSON:
        return {"rundir": self.rundir, "ending": self.ending, "exit_code": self.exit_code,
                "budgets": list(self.budgets) if self.budgets is not None else None,
                "window_s": list(self.window_s) if self.window_s is not None else None,
                "target": self.target, "target_code": self.target_code}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RunFacts:
        budgets, window, code = data.get("budgets"), data.get("window_s"), data.get("exit_code")
        return cls(
            optional_text(data.get("rundir")), optional_text(data.get("ending")),
            integer(code) if code is not None else None,
            tuple(map(text, sequence(budgets))) if budgets is not None else None,
            pair(window) if window is not None else None,
            optional_text(data.get("target")), optional_text(data.get("target_code")),
        )


@dataclass(frozen=True)
class AnalysisDetails:
    """What the analysis found beyond the metrics; each part None when the version lacks it."""

    budgets: tuple[BudgetJudgement, ...] | None = None
    series: Mapping[str, SeriesDetail] | None = None
    limits: tuple[Limit, ...] | None = None
    garbage_by_type: tuple[GarbageRow, ...] | None = None
    object_growth: tuple[GrowthRow, ...] | None = None
    cycles: tuple[CycleRow, ...] | None = None
    where: tuple[Finding, ...] | None = None

    def to_json(self) -> JSON:
        def rows(found: tuple[BudgetJudgement | Limit | GarbageRow | GrowthRow | CycleRow
                              | Finding, ...] | None) -> list[JSON] | None:
            return [row.to_json() for row in found] if found is not None else None

        return {
            "budgets": rows(self.budgets),
            "series": {k: v.to_json() for k, v in self.series.items()}
            if self.series is not None else None,
            "limits": rows(self.limits), "garbage_by_type": rows(self.garbage_by_type),
            "object_growth": rows(self.object_growth), "cycles": rows(self.cycles),
            "where": rows(self.where),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AnalysisDetails:
        series = data.get("series")
        return cls(
            _rows(data, "budgets", BudgetJudgement.from_json),
            {str(k): SeriesDetail.from_json(mapping(v)) for k, v in mapping(series).items()}
            if series is not None else None,
            _rows(data, "limits", Limit.from_json),
            _rows(data, "garbage_by_type", GarbageRow.from_json),
            _rows(data, "object_growth", GrowthRow.from_json),
            _rows(data, "cycles", CycleRow.from_json),
            _rows(data, "where", Finding.from_json),
        )


@dataclass(frozen=True)
class Summary:
    """``summary.json``: what a person, CI or a report needs about one run."""

    scenario: str
    injected: list[str]
    verdict: str
    reasons: list[str]
    metrics: dict[str, Metric]
    time_to_detect_s: float | None
    duration_s: float
    ops: int
    command: str
    run: RunFacts = RunFacts()
    analysis: AnalysisDetails | None = None  # None: the analysis failed, or a version 1 file
    version: int = SUMMARY_VERSION  # the version the file was written in

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise UsageError(f"unknown verdict {self.verdict!r}; one of {', '.join(VERDICTS)}.")

    def to_json(self) -> JSON:
        """Always version 4: a summary read from an older file is written as version 4."""
        return {
            "schema": SUMMARY_SCHEMA, "version": SUMMARY_VERSION, "scenario": self.scenario,
            "injected": list(self.injected), "verdict": self.verdict,
            "reasons": list(self.reasons),
            "metrics": {name: m.to_json() for name, m in self.metrics.items()},
            "time_to_detect_s": self.time_to_detect_s, "duration_s": self.duration_s,
            "ops": self.ops, "command": self.command, "run": self.run.to_json(),
            "analysis": self.analysis.to_json() if self.analysis is not None else None,
        }

    def fitted_line(self, series: str) -> FittedLine | None:
        """The line ``series`` was judged on, or None (none fitted, or an older file)."""
        details = self.analysis.series if self.analysis is not None else None
        found = details.get(series) if details is not None else None
        return found.fit if found is not None else None

    def series_detail(self, series: str) -> SeriesDetail | None:
        details = self.analysis.series if self.analysis is not None else None
        return details.get(series) if details is not None else None

    def findings(self) -> tuple[Finding, ...]:
        """"Where it grows", most certain first (empty for summaries written before it)."""
        return (self.analysis.where or ()) if self.analysis is not None else ()

    def where_it_grows(self) -> list[str]:
        """The "Where it grows" sentences."""
        return [f.text for f in self.findings()]

    def limits(self) -> tuple[Limit, ...]:
        return (self.analysis.limits or ()) if self.analysis is not None else ()

    def judged_budgets(self) -> tuple[BudgetJudgement, ...]:
        return (self.analysis.budgets or ()) if self.analysis is not None else ()

    def level_limit(self, metric: str) -> float | None:
        """The limit of the level budget (``<= N``) the summary judged ``metric`` on, or None."""
        judged = self.metrics.get(f"{metric}_max")
        text_ = judged.budget if judged is not None else None
        limit = next((lim for lim in self.limits() if lim.text == text_), None)
        return limit.limit if limit is not None and limit.kind == "level" else None

    def garbage_by_type(self) -> tuple[GarbageRow, ...]:
        """Garbage by type after the warm-up, most objects first (the analysis's top rows)."""
        return (self.analysis.garbage_by_type or ()) if self.analysis is not None else ()

    def cycles(self) -> tuple[CycleRow, ...]:
        """The aggregated reference cycles the garbage windows explained."""
        return (self.analysis.cycles or ()) if self.analysis is not None else ()

    def cycle_paths(self) -> list[str]:
        """The reference cycles, as ``A.x -> B.y -> (back)``."""
        return [c.path for c in self.cycles()]


def write_summary(rundir: Path, summary: Summary) -> Path:
    """Write ``summary.json`` whole or not at all; a UsageError naming the cause if not."""
    path = rundir / SUMMARY_FILE
    temporary = path.with_suffix(".json.tmp")
    try:
        temporary.write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
        temporary.replace(path)  # readers never see half a summary
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        why = f": {summary.reasons[0].rstrip('.')}" if summary.reasons else ""
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc}{full}; the samples are kept, and "
            f"'leak-harness report {rundir}' analyses them again once it can write "
            f"(the verdict was {summary.verdict}{why}).", exit_code=EXIT_HARNESS,
        ) from None
    return path


def load_summary(rundir: Path) -> Summary:
    """The summary of ``rundir`` as version 4, from any readable version."""
    path = rundir / SUMMARY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}.") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({json_error(exc)}).") from None
    if not isinstance(data, dict) or data.get("schema") != SUMMARY_SCHEMA:
        raise UsageError(f"{path} is not a leak-harness summary.")
    version = data.get("version")
    if version not in READABLE_VERSIONS:
        raise UsageError(
            f"{path} is summary version {version!r}; this leak-harness reads versions "
            f"{READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]} only."
        )
    try:
        return decode(data)
    except (KeyError, TypeError, ValueError, UsageError) as exc:
        why = exc.message if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{path} does not match summary version {version} ({why}).") from None


def json_error(exc: json.JSONDecodeError) -> str:
    """json's own words with the place ("Unterminated string starting at line 553,
    column 12"): its message alone ends mid-sentence at "starting at"."""
    place = f"line {exc.lineno}, column {exc.colno}"
    return f"{exc.msg} {place}" if exc.msg.endswith(" at") else f"{exc.msg} at {place}"


def unreadable_summary(rundir: Path) -> str | None:
    """Why ``rundir``'s summary.json is not JSON at all (cut in half, a stray byte), or
    None: a summary that parses, even one this version cannot decode, is not ours to
    replace."""
    try:
        json.loads((rundir / SUMMARY_FILE).read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        return json_error(exc)
    except OSError:
        return None
    return None


def decode(data: Mapping[str, object]) -> Summary:
    """A summary's JSON, of any readable version, as version 4 (moved, never recomputed)."""
    version = integer(data["version"])
    if version >= 4:
        run = RunFacts.from_json(mapping(data.get("run") or {}))
        details = data.get("analysis")
    else:
        run, details = _facts_before_v4(mapping(data.get("extra") or {}))
    metrics = {str(k): Metric.from_json(mapping(v)) for k, v in mapping(data["metrics"]).items()}
    ttd = data.get("time_to_detect_s")
    return Summary(
        scenario=text(data["scenario"]), injected=list(map(text, sequence(data["injected"]))),
        verdict=text(data["verdict"]), reasons=list(map(text, sequence(data["reasons"]))),
        metrics=metrics, time_to_detect_s=optional_number(ttd),
        duration_s=number(data["duration_s"]), ops=integer(data["ops"]),
        command=text(data["command"]), run=run,
        # Version 1 named the analysis module here instead of holding its details.
        analysis=AnalysisDetails.from_json(details) if isinstance(details, Mapping) else None,
        version=version,
    )


def _facts_before_v4(extra: Mapping[str, object]) -> tuple[RunFacts, object]:
    """Versions 1-3 kept the run's facts and the analysis in one free-form ``extra``."""
    facts = {k: extra[k] for k in ("rundir", "ending", "exit_code", "budgets", "window_s")
             if k in extra}
    return RunFacts.from_json(facts), extra.get("analysis")


def _rows(data: Mapping[str, object], key: str,
             read: Callable[[Mapping[str, object]], T]) -> tuple[T, ...] | None:
    found = data.get(key)
    return tuple(read(mapping(row)) for row in sequence(found)) if found is not None else None

