"""One run per folder: an exclusive ``flock`` on ``run.lock`` for the run's whole life.

Two runs started on the same ``--out`` would interleave their samples and lose
both results, so the second is refused before its worker starts. The kernel
drops a flock when its holder dies, so the lock a killed run leaves behind is
no lock: the next run takes the folder over without asking anybody.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.names import LOCK_FILE

_held: dict[Path, int] = {}  # run folder -> the descriptor holding its lock
_guard = threading.Lock()  # check runs cells on threads


def claim(rundir: Path) -> None:
    """Create ``rundir`` if need be and hold its lock (a no-op if this process holds it)."""
    key = rundir.resolve()
    with _guard:
        if key in _held:
            return
        try:
            rundir.mkdir(parents=True, exist_ok=True)
            fd = os.open(rundir / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot write to the output folder {rundir}: {exc.strerror}.") \
                from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(
                f"another run is writing to {rundir} right now; choose another output folder."
            ) from None
        _held[key] = fd


def release(rundir: Path) -> None:
    """Give the lock up and remove its file (nothing happens if it is not held)."""
    with _guard:
        fd = _held.pop(rundir.resolve(), None)
        if fd is None:
            return
        (rundir / LOCK_FILE).unlink(missing_ok=True)  # while held: nobody else can take it
        os.close(fd)
