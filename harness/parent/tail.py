"""Follow a growing ``samples.jsonl`` from the parent while the worker writes it.

The parent never measures; it only reads what the worker already wrote, for
the live progress line and for ``stop_when``. Each poll reads the new bytes
only and keeps an incomplete last line until its newline arrives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.runfiles.reader import RunDataBuilder, check_header, parse_line
from harness.runfiles.rundata import RunData


class SampleTail:
    """``keep_all=False`` keeps only the newest record of each type: enough for the
    progress line, and the parent's memory then stays flat however long the run
    (a 24-hour file is close to a million lines). ``stop_when`` needs them all."""

    def __init__(self, path: Path, keep_all: bool = True) -> None:
        self.path = path
        self.keep_all = keep_all
        self._offset = 0
        self._partial = b""
        self._line_number = 0
        self.builder: RunDataBuilder | None = None
        self.latest: dict[str, dict[str, Any]] = {}  # newest record per type
        self.events: dict[str, dict[str, Any]] = {}  # newest event per name (they are few)

    def poll(self) -> int:
        """Read what was appended since the last poll; return the new line count."""
        chunk = self._read_new()
        if not chunk:
            return 0
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            self._take(raw.decode("utf-8", errors="replace"))
        return len(lines)

    def rundata(self) -> RunData | None:
        """Everything read so far, or None before the header arrived."""
        return self.builder.build() if self.builder is not None else None

    def finish(self) -> RunData | None:
        """Everything the worker wrote, once it has exited: the samples as
        :func:`harness.runfiles.reader.load_samples` reads them, without reading the file
        again (a last line cut mid-write is the same ``truncated`` event)."""
        self.poll()
        if self.builder is not None and self._partial.strip():
            self.builder.add({"type": "event", "name": "truncated", "t": self.builder.last_t,
                              "line": self._line_number + 1})
            self._partial = b""
        return self.rundata()

    def _read_new(self) -> bytes:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return b""  # the worker has not opened it yet
        self._offset += len(chunk)
        return chunk

    def _take(self, line: str) -> None:
        self._line_number += 1
        if not line.strip():
            return
        record = parse_line(line, str(self.path), self._line_number)
        if self.builder is None:
            self.builder = RunDataBuilder(check_header(record, str(self.path)))
            return
        if self.keep_all:
            self.builder.add(record)
        self.latest[str(record["type"])] = record
        if record["type"] == "event":
            self.events[str(record.get("name"))] = record
