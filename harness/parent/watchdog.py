"""The parent's watch over a worker's process tree: limits, stacks, and the kill.

The worker runs in its own session, so its process group holds it and every
peer rank it starts. Descendants are remembered as they are seen: once a worker
dies, its children are re-parented and no longer findable from it, so the kill
at the end uses both the process group and everything ever seen.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.config import RunConfig
from harness.control import heartbeat_age

STACK_WAIT_S = 2.0  # how long faulthandler gets to write every thread's stack


@dataclass(frozen=True)
class Breach:
    """A limit the worker broke: the verdict it earns and the sentence why."""

    verdict: str  # "hung", "ceiling", or "interrupted" (a second Ctrl-C)
    reason: str


class ProcessTree:
    """The worker and all its descendants, for RSS totals and the final kill."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.pgid = pid  # start_new_session makes the worker its group's leader
        self.root = psutil.Process(pid)
        self.seen: dict[int, psutil.Process] = {pid: self.root}

    def rss(self) -> int:
        """RSS of the worker plus its descendants (peer ranks count too)."""
        total = 0
        for process in self._members():
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
        return total

    def _members(self) -> list[psutil.Process]:
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            children = []
        for child in children:
            self.seen.setdefault(child.pid, child)
        return [self.root, *children]

    def dump_stacks(self, stacks: Path) -> bool:
        """Ask the worker for every thread's stack (SIGUSR1 → faulthandler)."""
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return False
        deadline = time.monotonic() + STACK_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if stacks.exists() and stacks.stat().st_size > 0:
                time.sleep(0.1)  # let the remaining threads' frames land
                return True
        return False

    def kill_all(self) -> list[int]:
        """SIGKILL the group and every descendant ever seen; return the pids killed."""
        self._members()  # one last look before the tree falls apart
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)
        alive = [p for p in self.seen.values() if still_running(p)]
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(alive, timeout=5)
        return [p.pid for p in alive]


def still_running(process: psutil.Process) -> bool:
    """Alive and not a zombie (an exited child not reaped yet writes nothing more)."""
    # is_running() also checks the creation time, so a reused pid is not ours.
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


class Watchdog:
    """Wall-clock timeout, heartbeat and RSS ceiling, checked by the parent's loop."""

    def __init__(self, config: RunConfig, tree: ProcessTree, ceiling: int) -> None:
        self.config = config
        self.tree = tree
        self.ceiling = ceiling
        self.started = time.monotonic()
        self.peak_rss = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def check(self) -> Breach | None:
        timeout = self.config.wall_timeout_s
        if self.elapsed() > timeout:
            return Breach("hung", f"the worker was still running after the {timeout:g} s timeout.")
        silent = heartbeat_age(self.config.path)
        if silent > self.config.heartbeat_s:
            return Breach(
                "hung",
                f"the worker's main loop gave no heartbeat for {silent:.1f} s "
                f"(limit {self.config.heartbeat_s:g} s).",
            )
        rss = self.tree.rss()
        self.peak_rss = max(self.peak_rss, rss)
        if rss > self.ceiling:
            return Breach(
                "ceiling",
                # Counted from the worker's start, not the samples' clock (which starts
                # once the worker has imported torch and built the cache): said so.
                f"the worker's RSS reached {rss / 1e6:.0f} MB {self.elapsed():.1f} s after the "
                f"worker started, over the {self.ceiling / 1e6:.0f} MB ceiling; it was killed.",
            )
        return None


def default_ceiling() -> int:
    """Half the machine's memory: killed long before the machine suffers."""
    return int(psutil.virtual_memory().total // 2)
