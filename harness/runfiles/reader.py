"""Reading ``samples.jsonl`` back into a :class:`~harness.runfiles.rundata.RunData`.

Unknown schemas and versions are refused with a sentence, never guessed at.
Version history of ``leak-harness/samples``:

- 1: header line, then one line per sample or event (line format in
  :mod:`harness.runfiles.records`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from harness.errors import UsageError
from harness.runfiles.names import SAMPLES_FILE
from harness.runfiles.records import HeaderLine
from harness.runfiles.rundata import RunData, Series
from harness.runfiles.samples import SCHEMA as SAMPLES_SCHEMA
from harness.runfiles.samples import VERSION as SAMPLES_VERSION
from harness.runfiles.signals import MEMORY_SIGNALS
from harness.runfiles.summary import Summary, load_summary


class RunDataBuilder:
    """Collects parsed sample lines and turns them into a RunData on demand."""

    def __init__(self, header: HeaderLine) -> None:
        self.header = header
        self._rss: list[tuple[float, float]] = []
        self._uss: list[tuple[float, float]] = []
        self._ops: list[tuple[float, float]] = []
        self._progress_ops: list[tuple[float, float]] = []
        self._gauges: dict[str, list[tuple[float, float]]] = {}
        self._memory: dict[str, list[tuple[float, float]]] = {}
        self.data = RunData(header)
        self.last_t = 0.0

    def add(self, record: Mapping[str, Any]) -> None:
        kind, t = record.get("type"), float(record.get("t", 0.0))
        self.last_t = max(self.last_t, t)
        if kind == "rss":
            self._rss.append((t, float(record["rss"])))
            self._ops.append((t, float(record.get("ops", 0))))
            if record.get("uss") is not None:
                self._uss.append((t, float(record["uss"])))
        elif kind in ("heap", "tensors"):
            for name in MEMORY_SIGNALS.keys() & record.keys():
                self._memory.setdefault(name, []).append((t, float(record[name])))
        elif kind == "gauges":
            for name, value in record["values"].items():
                self._gauges.setdefault(name, []).append((t, float(value)))
        elif kind == "progress":
            self._progress_ops.append((t, float(record["ops"])))
        else:
            self._add_listed(kind, dict(record))

    def _add_listed(self, kind: Any, record: dict[str, Any]) -> None:
        # Each list holds its kind's lines of harness.runfiles.records; the fields are
        # held to them by the tests, not here, so a line gaining a field still loads.
        lists: dict[str, list[Any]] = {
            "gc": self.data.gc_events,
            "garbage": self.data.garbage_windows,
            "objects": self.data.object_windows,
            "alloc": self.data.alloc_windows,
            "native": self.data.native_windows,
            "owners": self.data.owners,
            "notes": self.data.notes,
            "event": self.data.events,
        }
        if kind in lists:
            lists[kind].append(record)
        # Other types are newer additions within version 1: skipped, not refused.

    def build(self) -> RunData:
        data = self.data
        data.rss = series(self._rss, "B")
        data.uss = series(self._uss, "B")
        # Op counts ride on the 10 Hz RSS samples; progress lines stand in when
        # the RSS sampler was off.
        data.ops = series(self._ops or self._progress_ops, "ops")
        data.gauges = {name: series(points, "") for name, points in self._gauges.items()}
        data.memory = {
            name: series(points, MEMORY_SIGNALS[name]) for name, points in self._memory.items()
        }
        return data


def series(points: list[tuple[float, float]], unit: str) -> Series:
    if not points:
        return Series.empty(unit)
    array = np.asarray(points, dtype=np.float64)
    return Series(array[:, 0].copy(), array[:, 1].copy(), unit)


def check_header(record: Any, where: str) -> HeaderLine:
    """The header line's dict, or a sentence saying why this file is not ours."""
    if not isinstance(record, dict) or record.get("type") != "header":
        raise UsageError(f"{where} does not start with a leak-harness header line.")
    schema, version = record.get("schema"), record.get("version")
    if schema != SAMPLES_SCHEMA:
        raise UsageError(f"{where} has schema {schema!r}; expected {SAMPLES_SCHEMA!r}.")
    if version != SAMPLES_VERSION:
        raise UsageError(
            f"{where} is samples version {version!r}; this leak-harness reads version "
            f"{SAMPLES_VERSION} only (a newer harness wrote it?)."
        )
    return cast(HeaderLine, record)


MAX_CORRUPT_LINES = 20  # middle lines skipped, each marked, before the file is refused


def parse_line(text: str, where: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where} line {number} is not valid JSON ({exc.msg}).") from None
    if not isinstance(record, dict) or "type" not in record:
        raise UsageError(f"{where} line {number} is not a sample record.")
    return record


def load_samples(path: Path) -> RunData:
    """Read a samples file; a truncated last line becomes a ``truncated`` event.

    The file is read line by line: a 24-hour run has close to a million lines,
    and holding its text as well as the parsed samples would double the peak.
    """
    where = str(path)
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return read_samples(handle, where)
    except OSError as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}.") from None


def read_samples(lines: Iterable[str], where: str) -> RunData:
    builder: RunDataBuilder | None = None
    skipped: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.endswith("\n"):  # no newline after the last: cut mid-write
            if builder is None and line.strip():
                raise UsageError(f"{where} holds only a truncated header line.")
            if builder is None:
                break
            if line.strip():
                # Reported in-band, so analysis and reports can say the run was cut.
                builder.add({"type": "event", "name": "truncated", "t": builder.last_t,
                             "line": number})
            break
        if builder is None:
            builder = RunDataBuilder(check_header(parse_line(line, where, 1), where))
        elif line.strip():
            record = _readable(line, where, number, skipped)
            if record is None:
                builder.add({"type": "event", "name": "corrupt_line", "t": builder.last_t,
                             "line": number})
            else:
                add_record(builder, record, where, number)
    if builder is None:
        raise UsageError(f"{where} is empty: the worker wrote no header.")
    return builder.build()


def _readable(line: str, where: str, number: int, skipped: list[int]) -> dict[str, Any] | None:
    """A middle line's record, or None for one that is not JSON (a bad disk block, a
    stray write): skipped and marked in-band, so one bad line no longer costs every
    plot. Past MAX_CORRUPT_LINES the file is not a samples file this harness wrote."""
    try:
        return parse_line(line, where, number)
    except UsageError:
        skipped.append(number)
        if len(skipped) > MAX_CORRUPT_LINES:
            raise UsageError(f"{where} has more than {MAX_CORRUPT_LINES} lines that are not "
                             f"sample records (lines {skipped[0]}, {skipped[1]}, ...).") from None
        return None


def add_record(builder: RunDataBuilder, record: dict[str, Any], where: str, number: int) -> None:
    try:
        builder.add(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where} line {number} lacks a valid field ({exc}).") from None


def open_samples(path: Path) -> tuple[RunData | None, str | None]:
    """The samples of a run, or None and the sentence saying why there are none."""
    try:
        return load_samples(path), None
    except UsageError as exc:
        return None, exc.message


@dataclass(frozen=True)
class LoadedRun:
    """A finished run as every report and face reads it: its summary, and its samples or
    why there are none. Built once per command (:func:`open_run`) or handed over by the
    runner, which already parsed both."""

    rundir: Path
    summary: Summary
    samples: RunData | None
    why_no_samples: str | None = None


def open_run(rundir: Path) -> LoadedRun:
    """Read ``rundir``'s summary and samples, each once; UsageError without a summary."""
    summary = load_summary(rundir)
    samples, why = open_samples(rundir / SAMPLES_FILE)
    return LoadedRun(rundir, summary, samples, why)
