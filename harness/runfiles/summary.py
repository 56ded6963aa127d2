"""``summary.json``: the verdict of one run, versioned, with upgrades from older versions.

Version history of ``leak-harness/summary``:

- 1: verdict, reasons, metrics with units, time to detect, duration, ops and
  the command that reproduces the run.
- 2: also stores the fitted line of each judged series, so reports draw the
  line the verdict was judged on instead of fitting their own. It sits at
  ``extra.analysis.series.<series>.fit`` (the analysis's
  ``details.series``, see :meth:`harness.analysis.fitline.FittedLine.to_json`):
  ``basis`` (all, floor, tail, after_step); ``start_s``, ``end_s`` (the line's
  window, s since start); ``analysed_from_s`` (first sample analysed, s);
  ``mid_value`` (the line's value at the window's middle, in ``value_unit``);
  ``per_h`` and ``ci`` (the judged slope and its 95% interval, in ``unit``,
  ``value_unit`` per hour).
- 3: also stores what the run page shows, so reports render without
  analysing: ``extra.analysis.limits`` (each budget parsed: ``text``,
  ``metric``, ``kind`` (rate or level), ``limit`` and ``unit`` in the canonical
  units of :class:`harness.budgets.Budget`), besides ``garbage_by_type`` and
  ``cycles`` (the aggregated cycle shapes), which most version 2 files hold.

Older versions load as they are (:attr:`Summary.version` says which); this
module only loads and validates. Bringing an old summary up to date means
re-analysing its samples, so the upgrades live with the analysis
(:mod:`harness.analysis.upgrade`). Versions this code does not know are refused.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.rundata import RunData
from harness.verdicts import EXIT_HARNESS, VERDICTS

SUMMARY_SCHEMA = "leak-harness/summary"
SUMMARY_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


@dataclass(frozen=True)
class Summary:
    """``summary.json``: what a person, CI or a report needs about one run."""

    scenario: str
    injected: list[str]
    verdict: str
    reasons: list[str]
    metrics: dict[str, dict[str, Any]]
    time_to_detect_s: float | None
    duration_s: float
    ops: int
    command: str
    extra: dict[str, Any] = field(default_factory=dict)  # rundir, exit status, analysis, ...
    version: int = SUMMARY_VERSION  # the format it was read in; older ones lack fields

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise UsageError(f"unknown verdict {self.verdict!r}; one of {', '.join(VERDICTS)}.")

    def to_json(self) -> dict[str, Any]:
        fields_only = {k: v for k, v in asdict(self).items() if k != "version"}
        return {"schema": SUMMARY_SCHEMA, "version": self.version, **fields_only}

    def fitted_line(self, series: str) -> dict[str, Any] | None:
        """The stored line ``series`` was judged on (version 2), or None.

        None also for a series the analysis could not fit (too few samples)
        and for a version 1 summary that was not upgraded.
        """
        analysis = self.extra.get("analysis")
        found = _get(_get(_get(analysis, "series"), series), "fit")
        return found if isinstance(found, dict) else None

    def where_it_grows(self) -> list[str]:
        """The "Where it grows" sentences (empty for summaries written before them)."""
        found = _get(self.extra.get("analysis"), "where")
        if not isinstance(found, list):
            return []
        return [str(f["text"]) for f in found if isinstance(f, Mapping) and "text" in f]

    def level_limit(self, metric: str) -> float | None:
        """The limit of the level budget (``<= N``) the summary judged ``metric`` on, or None.

        The judged budget is the one the ``<metric>_max`` metric names; its parsed
        limit is the analysis's (version 3, :func:`harness.analysis.upgrade.upgrade`).
        """
        text = self.metrics.get(f"{metric}_max", {}).get("budget")
        found = _get(self.extra.get("analysis"), "limits")
        if not text or not isinstance(found, list):
            return None
        for limit in found:
            if isinstance(limit, Mapping) and limit.get("text") == text:
                value = limit.get("limit")
                if limit.get("kind") == "level" and isinstance(value, int | float):
                    return float(value)
                return None
        return None

    def garbage_by_type(self) -> list[dict[str, Any]]:
        """Garbage by type after the warm-up, most objects first (the analysis's top rows)."""
        found = _get(self.extra.get("analysis"), "garbage_by_type")
        return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []

    def cycles(self) -> list[dict[str, Any]]:
        """The aggregated reference cycles: ``shape``, ``count``, ``retained_bytes``, ``types``."""
        found = _get(self.extra.get("analysis"), "cycles")
        if not isinstance(found, list):
            return []
        return [c for c in found if isinstance(c, dict) and c.get("shape")]

    def cycle_paths(self) -> list[str]:
        """The reference cycles the garbage windows explained, as ``A.x -> B.y -> (back)``."""
        return [" -> ".join([*c["shape"], "(back)"]) for c in self.cycles()]


# Brings a summary up to date from the run's samples (None: none could be read).
# The analysis provides it (harness.analysis.upgrade.upgrade); faces hand it to reports.
Upgrade = Callable[[Summary, RunData | None], Summary]


def _get(mapping: object, key: str) -> object:
    return mapping.get(key) if isinstance(mapping, Mapping) else None


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
    """The summary as written, in any readable version (not upgraded: see
    :func:`harness.analysis.upgrade.upgrade`)."""
    path = rundir / SUMMARY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}.") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
    if not isinstance(data, dict) or data.get("schema") != SUMMARY_SCHEMA:
        raise UsageError(f"{path} is not a leak-harness summary.")
    version = data.get("version")
    if version not in READABLE_VERSIONS:
        raise UsageError(
            f"{path} is summary version {version!r}; this leak-harness reads versions "
            f"{READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]} only."
        )
    fields_only = {k: v for k, v in data.items() if k not in ("schema", "version")}
    try:
        return Summary(**fields_only, version=version)
    except TypeError as exc:
        raise UsageError(f"{path} does not match summary version {version} ({exc}).") from None


def load_run(rundir: Path) -> tuple[RunData, Summary]:
    """Both result files of a finished run."""
    return load_samples(rundir / SAMPLES_FILE), load_summary(rundir)
