"""The control channel between parent and worker: a few files in the run dir.

Results never travel this way (they are in ``samples.jsonl``); this is only
liveness and stopping. Files, not pipes, so a person can use them too:
``touch <rundir>/stop`` ends a run cleanly, ``stat <rundir>/heartbeat`` shows
when the worker's main loop last came round.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from harness.runfiles.names import HEARTBEAT_FILE, STOP_FILE

PARENT_ENV = "LEAK_HARNESS_PARENT"  # the runner's pid, for die_with_parent
# The folder the user ran the harness from: the worker imports from it last, so
# their modules (``--target mine:make``) import without shadowing installed ones.
USER_DIR_ENV = "LEAK_HARNESS_USER_DIR"
PR_SET_PDEATHSIG = 1


class Heartbeat:
    """Touches the heartbeat file from the worker's main loop, at most every ``every_s``.

    Only the main loop beats: a sampler thread that keeps running while
    ``step()`` is blocked must not make a hung worker look alive. The one
    exception is :meth:`keep_alive`, for the phases around the loop that can take
    long without hanging (building a cache that compiles a native extension on
    first use: ~20 s, ~30 s on a loaded machine; removing thousands of files a
    storage tier wrote), for a bounded time only, so a phase that truly hangs
    still goes silent.
    """

    def __init__(self, rundir: Path, every_s: float = 0.2) -> None:
        self.path = rundir / HEARTBEAT_FILE
        self.stop_path = rundir / STOP_FILE
        self._every_s = every_s
        self._last = -every_s
        self.path.touch()

    def beat(self, now: float) -> bool:
        """Refresh the heartbeat; return True if a stop file appeared."""
        if now - self._last < self._every_s:
            return False
        self._last = now
        os.utime(self.path)
        return self.stop_path.exists()

    @contextlib.contextmanager
    def keep_alive(self, limit_s: float) -> Iterator[None]:
        """Beat from a thread while the block runs, for at most ``limit_s`` seconds."""
        done = threading.Event()

        def beat_until_done() -> None:
            deadline = time.monotonic() + limit_s
            while not done.wait(self._every_s) and time.monotonic() < deadline:
                with contextlib.suppress(OSError):  # the run dir may be going away
                    os.utime(self.path)

        beater = threading.Thread(target=beat_until_done, name="heartbeat-keep-alive",
                                  daemon=True)
        beater.start()
        try:
            yield
        finally:
            done.set()
            beater.join()
            os.utime(self.path)  # the phase ended: the main loop's clock starts again


class StopRequest:
    """Set by SIGTERM (or the stop file); the main loop ends at the next step."""

    def __init__(self) -> None:
        self.requested = False
        self.why = ""

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)

    def set(self, why: str) -> None:
        if not self.requested:
            self.requested, self.why = True, why

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only a flag: the handler runs between bytecodes of whatever is running.
        self.set("SIGTERM")


def heartbeat_age(rundir: Path, now: float | None = None) -> float:
    """Seconds since the worker's last beat (the parent creates the file at spawn)."""
    try:
        mtime = (rundir / HEARTBEAT_FILE).stat().st_mtime
    except FileNotFoundError:
        return 0.0
    return (time.time() if now is None else now) - mtime


def request_stop(rundir: Path, pid: int) -> None:
    """Ask the worker to finish cleanly: stop file first, then SIGTERM."""
    (rundir / STOP_FILE).touch()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def die_with_parent() -> bool:
    """Have the kernel SIGKILL this worker if its runner dies (kill -9, OOM).

    Without it a hung worker whose runner was killed would wait forever in its
    own session, out of reach of Ctrl-C. Linux only; the runner calls
    ``Popen`` from the thread that then waits for the worker, as the
    death signal follows the thread that started the child. Returns False
    when the runner is already gone.
    """
    expected = os.environ.get(PARENT_ENV)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    return expected is None or os.getppid() == int(expected)
