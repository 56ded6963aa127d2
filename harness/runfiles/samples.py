"""The samples stream: ``samples.jsonl``, one JSON object per line, flushed per line.

Only the worker writes it. Every line is complete and flushed when ``write``
returns, so a crash, a kill or an out-of-memory leaves every sample up to that
moment; the loader tolerates a truncated last line. Line format: see
:mod:`harness.runfiles.records`.
"""

from __future__ import annotations

import fcntl
import gc
import importlib.metadata
import json
import os
import platform
import resource
import sys
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from harness.provenance import commit_under_test, git_commit
from harness.runfiles.records import HeaderLine, SampleLine

SCHEMA = "leak-harness/samples"
VERSION = 1


class SampleWriter:
    """Thread-safe, line-buffered JSON-lines writer.

    Never call it from a ``gc.callbacks`` hook or a signal handler: the lock is
    not re-entrant, on purpose, so one line can never interleave with another.

    In a recorded program the descriptor is not only ours: a daemon closes every
    descriptor it did not open and then opens its own files, which get our number
    (113 to 464 sample lines once went into a program's data file). So each write
    first checks that the descriptor still names our file, and reopens the file
    (appending) when it does not; the program's descriptor is never written to or
    closed. A reuse between the check and the write is not caught: it needs the
    program to close and reopen within microseconds of a sample.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._closed = False
        self.reopened = 0  # times the descriptor was found taken and the file reopened
        self._fd, self._identity, self._file = self._open(os.O_TRUNC)

    def _open(self, how: int) -> tuple[int, tuple[int, int], TextIO]:
        fd = high(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | how, 0o644))
        stat = os.fstat(fd)
        # closefd=False: the descriptor is closed by us, and only while it is ours.
        return fd, (stat.st_dev, stat.st_ino), open(
            fd, "w", encoding="utf-8", buffering=1, closefd=False)

    def _ours(self) -> bool:
        try:
            stat = os.fstat(self._fd)
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        with self._lock:
            if self._closed:  # a sampler thread may outlive close() by one tick
                return
            if not self._ours():
                self._fd, self._identity, self._file = self._open(os.O_APPEND)
                self.reopened += 1
            self._file.write(line)

    def line(self, record: SampleLine) -> None:
        self.write({**record, "t": round(record["t"], 4)})

    def sample(self, kind: str, t: float, **fields: Any) -> None:
        self.write({"type": kind, "t": round(t, 4), **fields})

    def event(self, name: str, t: float, **fields: Any) -> None:
        self.write({"type": "event", "t": round(t, 4), "name": name, **fields})

    def disown(self) -> None:
        """Drop every later write and close this copy of the file without the lock: in a
        forked child, whose copy of the lock may be held by a thread that no longer
        exists, and whose file is its parent's (each line is flushed as it is written,
        so closing the child's descriptor writes nothing)."""
        self._closed = True
        self._release()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()

    def _release(self) -> None:
        # A taken descriptor is left alone: every line was flushed as it was written, so
        # the file object holds nothing for it, and closing it (closefd=False) is a no-op.
        if self._ours():
            self._file.close()
            os.close(self._fd)


HIGH_FD = 700  # above what a program's own files take: it opens the lowest free number


def high(fd: int) -> int:
    """``fd`` moved to a high number (close-on-exec), so a program that closed it does not
    get it back with its next ``open``; ``fd`` itself where the limit does not allow."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    floor = min(HIGH_FD, soft - 64) if soft != resource.RLIM_INFINITY else HIGH_FD
    if fd >= floor:
        return fd
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    except OSError:
        return fd
    os.close(fd)
    return moved


def header(config: dict[str, Any], gc_mode_info: dict[str, Any]) -> HeaderLine:
    """The first line: schema, version, the frozen config and the environment."""
    return {
        "type": "header",
        "schema": SCHEMA,
        "version": VERSION,
        "config": config,
        "env": environment(config, gc_mode_info),
    }


def environment(config: dict[str, Any], gc_mode_info: dict[str, Any]) -> dict[str, Any]:
    """What makes two runs comparable: GC differs between Python versions and builds."""
    return {
        "python": platform.python_version(),
        "python_build": " ".join(platform.python_build()),
        "compiler": platform.python_compiler(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "gc_thresholds": list(gc.get_threshold()),
        "gc": gc_mode_info,
        "pythonmalloc": os.environ.get("PYTHONMALLOC"),
        "torch": torch_version(),
        "seed": config.get("seed"),
        "cpu_count": os.cpu_count(),
        "pid": os.getpid(),
        "git_commit": commit_under_test(config.get("target")),  # the code under test
        "harness_commit": git_commit(),
        "host": platform.node(),
        "started_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def torch_version() -> str | None:
    """Torch's version without importing it (the import costs ~1.5 s, ~220 MB)."""
    module = sys.modules.get("torch")
    if module is not None:
        return str(getattr(module, "__version__", "unknown"))
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
