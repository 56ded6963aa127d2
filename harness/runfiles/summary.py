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

Older versions load as they are (:attr:`Summary.version` says which).
:func:`upgrade` brings one up to date in memory when a reader needs what it
lacks; a version 1 summary is upgraded by re-analysing its samples once
(:func:`upgrade_from_v1`). Versions this code does not know are refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.rundata import RunData
from harness.verdicts import ENDING_VERDICTS, VERDICTS

SUMMARY_SCHEMA = "leak-harness/summary"
SUMMARY_VERSION = 2
READABLE_VERSIONS = (1, 2)


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

    def cycle_paths(self) -> list[str]:
        """The reference cycles the garbage windows explained, as ``A.x -> B.y -> (back)``."""
        found = _get(self.extra.get("analysis"), "cycles")
        if not isinstance(found, list):
            return []
        return [" -> ".join([*c["shape"], "(back)"]) for c in found
                if isinstance(c, Mapping) and c.get("shape")]


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
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc}; the samples are kept, and "
            f"'leak-harness report {rundir}' analyses them again once it can write "
            f"(the verdict was {summary.verdict})."
        ) from None
    return path


def load_summary(rundir: Path) -> Summary:
    """The summary as written, in any readable version (not upgraded: see :func:`upgrade`)."""
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


def upgrade(summary: Summary, run: RunData | None) -> Summary:
    """``summary`` brought to :data:`SUMMARY_VERSION` in memory, one version at a time.

    ``run`` is the run's samples, which an upgrade may re-analyse. An upgrade
    that cannot be done (no samples) stops there: the summary keeps its
    older version, and readers see what that version lacks as missing.
    """
    while summary.version < SUMMARY_VERSION:
        upgraded = UPGRADES[summary.version](summary, run)
        if upgraded.version == summary.version:
            return summary
        summary = upgraded
    return summary


def upgrade_from_v1(summary: Summary, run: RunData | None) -> Summary:
    """Version 2 of a version 1 summary: the fitted lines from one re-analysis of ``run``.

    The samples are analysed as the runner did (``summarize`` with the budgets
    and warm-up of the samples header's config), and only the per-series
    details (with their fitted lines) are taken: verdict, reasons and metrics
    stay the ones the file records. The lines are today's analysis of the old
    samples, the closest a version 1 run can come to the line it was judged on.
    Without samples, or when the recorded budgets cannot be analysed, the
    summary is returned unchanged.
    """
    # Imported here: reading a summary must not load numpy and scipy, and the
    # analysis imports this package's data types.
    from harness.analysis.summary import summarize

    if run is None:
        return summary
    config = run.header.get("config") or {}
    warmup = config.get("warmup_s")
    outcome = summary.verdict if summary.verdict in ENDING_VERDICTS else None
    try:
        analysis = summarize(
            run, [str(b) for b in config.get("budgets") or ()],
            float(warmup) if isinstance(warmup, int | float) else None, outcome=outcome,
        )
    except ValueError:
        return summary
    old = summary.extra.get("analysis")
    details = {**(old if isinstance(old, dict) else {}), "series": analysis.details["series"]}
    return replace(summary, extra={**summary.extra, "analysis": details}, version=2)


UPGRADES: dict[int, Callable[[Summary, RunData | None], Summary]] = {1: upgrade_from_v1}
