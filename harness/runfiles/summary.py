"""``summary.json``: the verdict of one run, versioned.

Version history of ``leak-harness/summary``:

- 1: verdict, reasons, metrics with units, time to detect, duration, ops and
  the command that reproduces the run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.reader import load_samples
from harness.runfiles.rundata import RunData
from harness.verdicts import VERDICTS

SUMMARY_SCHEMA = "leak-harness/summary"
SUMMARY_VERSION = 1


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
    extra: dict[str, Any] = field(default_factory=dict)  # rundir, exit status, ...

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise UsageError(f"unknown verdict {self.verdict!r}; one of {', '.join(VERDICTS)}.")

    def to_json(self) -> dict[str, Any]:
        return {"schema": SUMMARY_SCHEMA, "version": SUMMARY_VERSION, **asdict(self)}


def write_summary(rundir: Path, summary: Summary) -> Path:
    path = rundir / SUMMARY_FILE
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)  # readers never see half a summary
    return path


def load_summary(rundir: Path) -> Summary:
    path = rundir / SUMMARY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}.") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
    if not isinstance(data, dict) or data.get("schema") != SUMMARY_SCHEMA:
        raise UsageError(f"{path} is not a leak-harness summary.")
    if data.get("version") != SUMMARY_VERSION:
        raise UsageError(
            f"{path} is summary version {data.get('version')!r}; this leak-harness reads "
            f"version {SUMMARY_VERSION} only."
        )
    fields_only = {k: v for k, v in data.items() if k not in ("schema", "version")}
    try:
        return Summary(**fields_only)
    except TypeError as exc:
        raise UsageError(f"{path} does not match summary version 1 ({exc}).") from None


def load_run(rundir: Path) -> tuple[RunData, Summary]:
    """Both result files of a finished run."""
    return load_samples(rundir / SAMPLES_FILE), load_summary(rundir)
