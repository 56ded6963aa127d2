"""The parent's watch loop over one worker: exit, limits, stop requests, Ctrl-C.

It polls ten times a second, reads only what the worker wrote (the samples file
and the heartbeat's mtime) and ends in an ``Ending``: how the process ended and
why, in sentences. Analysis comes after, in ``harness.parent.runner``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from threading import Event

from harness.config import RunConfig
from harness.control import request_stop
from harness.errors import UsageError
from harness.parent.tail import SampleTail
from harness.parent.watchdog import Breach, ProcessTree, Watchdog
from harness.runfiles.fatal import died_from
from harness.runfiles.names import (
    CLOSED_EVENT,
    REFUSED_FILE,
    SAMPLES_FILE,
    STACKS_FILE,
    TRACEBACK_FILE,
    WORKER_LOG,
)
from harness.runfiles.rundata import RunData

REFUSED = "refused"  # an Ending status, never a verdict: the runner raises UsageError

POLL_S = 0.1
FOLLOW_S = 0.5  # progress line refresh
STOP_WHEN_S = 1.0  # early-stop predicate cadence
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # what a stop request (or a Ctrl-C) sends
MIN_STOP_GRACE_S = 15.0  # a clean stop still runs the final garbage window


@dataclass(frozen=True)
class Snapshot:
    """What the live progress line shows, read from the samples file."""

    elapsed_s: float
    total_s: float | None
    ops: int
    ops_per_s: float
    phase: str
    rss: int | None
    gauges: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Ending:
    """How the worker ended: finished, stopped, interrupted, crashed, hung, ceiling,
    error, or refused (before the workload ran; the runner raises a UsageError)."""

    status: str
    reasons: list[str]
    exit_code: int | None
    wall_s: float
    # An early stop: the end of the samples that made it (the worker's clock). The run
    # is judged on those, as the stop decided; what came while it stopped is kept.
    judged_until_s: float | None = None


class Supervisor:
    def __init__(
        self,
        config: RunConfig,
        process: subprocess.Popen[bytes],
        tree: ProcessTree,
        ceiling: int,
        stop_when: Callable[[RunData], bool] | None = None,
        on_progress: Callable[[Snapshot], None] | None = None,
        cancel: Event | None = None,
    ) -> None:
        self.config = config
        self.cancel = cancel
        self.process = process
        self.tree = tree
        self.watchdog = Watchdog(config, self.tree, ceiling)
        self.tail = SampleTail(config.path / SAMPLES_FILE, keep_all=stop_when is not None)
        self.stop_when = stop_when
        self.on_progress = on_progress
        self.notes: list[str] = []  # what went wrong on our side, said in the summary
        self.stop_reason: str | None = None
        self.stop_since = 0.0
        self.decided_through_s: float | None = None  # the samples the early stop saw
        self._next_follow = 0.0
        self._next_predicate = STOP_WHEN_S

    def watch(self) -> Ending:
        while True:
            try:
                ending = self._tick()
                if ending is not None:
                    return replace(ending, reasons=ending.reasons + self.notes)
                time.sleep(POLL_S)
            except KeyboardInterrupt:
                if self.stop_reason == "interrupted":  # a second Ctrl-C: no more waiting
                    second = "killed at once by a second Ctrl-C; the samples so far were analysed."
                    return self._kill(Breach("interrupted", second))
                self._request_stop("interrupted")

    def _tick(self) -> Ending | None:
        code = self.process.poll()
        if code is not None:
            return self._exited(code)
        breach = self.watchdog.check() or self._stop_overdue()
        if breach is not None:
            return self._kill(breach)
        if self.cancel is not None and self.cancel.is_set():
            self._request_stop("interrupted")  # Ctrl-C seen by another thread (check -j N)
        self._follow()
        return None

    def _stop_overdue(self) -> Breach | None:
        grace = max(MIN_STOP_GRACE_S, self.config.heartbeat_s)
        if self.stop_reason is None or self.watchdog.elapsed() - self.stop_since < grace:
            return None
        return Breach("hung", f"the worker did not stop within {grace:g} s of being asked.")

    def _request_stop(self, why: str) -> None:
        if self.stop_reason is None:
            self.stop_reason, self.stop_since = why, self.watchdog.elapsed()
            request_stop(self.config.path, self.process.pid)

    def _follow(self) -> None:
        now = self.watchdog.elapsed()
        if now < self._next_follow:
            return
        self._next_follow = now + FOLLOW_S
        try:
            self.tail.poll()
        except UsageError as exc:  # the loader will say it again, with the line number
            self.notes.append(f"live reading stopped: {exc.message}")
            self.on_progress = self.stop_when = None
        self._show(now)
        if self.stop_when is not None and self.stop_reason is None and now >= self._next_predicate:
            self._next_predicate = now + STOP_WHEN_S
            self._ask_stop_when()

    # A caller's callback that raises is switched off and noted in the summary:
    # a broken display or predicate must not cost the run its results.

    def _show(self, now: float) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(self.snapshot(now))
        except Exception as exc:
            self.on_progress = None
            self._note("the progress display", exc)

    def _ask_stop_when(self) -> None:
        data = self.tail.rundata()
        if data is None or self.stop_when is None:
            return
        try:
            certain = self.stop_when(data)
        except Exception as exc:
            self.stop_when = None
            self._note("the early-stop check", exc)
            return
        if certain:
            self.decided_through_s = data.data_end_s
            self._request_stop("early stop")

    def _note(self, what: str, exc: Exception) -> None:
        self.notes.append(f"{what} failed and was switched off: {type(exc).__name__}: {exc}")

    def snapshot(self, now: float) -> Snapshot:
        latest = self.tail.latest
        progress, sampled = latest.get("progress", {}), latest.get("rss", {})
        rss = sampled.get("rss")
        # RSS lines carry the op count ten times a second; progress lines once.
        ops = max(int(progress.get("ops", 0)), int(sampled.get("ops", 0)))
        return Snapshot(
            elapsed_s=now, total_s=self.config.duration_s, ops=ops,
            ops_per_s=float(progress.get("ops_per_s", 0.0)), phase=str(progress.get("phase", "")),
            rss=int(rss) if rss is not None else None,
            gauges=dict(latest.get("gauges", {}).get("values", {})),
        )

    def _kill(self, breach: Breach) -> Ending:
        reasons = [breach.reason]
        if breach.verdict == "hung":
            stacks = self.config.path / STACKS_FILE
            dumped = self.tree.dump_stacks(stacks)
            reasons.append(
                f"every thread's stack is in {stacks}." if dumped
                else "the worker wrote no stacks before the kill."
            )
        self.tree.kill_all()
        self.process.wait()
        return Ending(breach.verdict, reasons, self.process.returncode, self.watchdog.elapsed())

    def _exited(self, code: int) -> Ending:
        wall = self.watchdog.elapsed()
        full = full_disk(self.config.path) if code != 0 else None
        if full is not None:  # its samples stop where the disk did: nothing to judge by
            return Ending("error", [full], code, wall)
        if self.stop_reason is not None and (code == 0 or -code in STOP_SIGNALS):
            return self._after_stop_request(code, wall)
        if code == 0:
            return Ending(*self._clean_end(), code, wall)
        if code == 2:
            return Ending(REFUSED, [self._refusal()], code, wall)
        if code == 3:
            return Ending("error", [f"the harness failed inside the worker: {self._error()}"],
                          code, wall)
        if code < 0:
            return Ending("crashed", [died_from(-code, "the worker",
                                                self.config.path / WORKER_LOG)], code, wall)
        if code == 1 and (self.config.path / TRACEBACK_FILE).exists():
            return Ending("crashed", [f"the scenario raised: {self._error()}"], code, wall)
        return Ending("crashed", [f"the worker exited with code {code}: {self._log_tail()}"],
                      code, wall)

    def _after_stop_request(self, code: int, wall: float) -> Ending:
        """How a worker we asked to stop ended. Its loop may have ended by itself before
        the request counted: then a run that closed (its end-of-run check passed too)
        finished, whatever the signal did to its exit; and a worker the stop signal
        killed is cut short, never a crash (a finished cell of an interrupted check once
        counted as crashed, and went into the history so)."""
        self.tail.poll()
        end = self.tail.events.get("end")
        by_itself = end is not None and not str(end.get("reason", "")).startswith("stopped")
        if by_itself and CLOSED_EVENT in self.tail.events:
            return Ending("finished", ["a stop request arrived after the run had finished."],
                          code, wall)
        until = self.decided_through_s if self.stop_reason == "early stop" else None
        verdict, reasons = self._clean_end()
        if code < 0:
            reasons = [*reasons, f"the worker was ended by the stop request "
                                 f"({signal.Signals(-code).name}) before it closed."]
        return Ending(verdict, reasons, code, wall, until)

    def _clean_end(self) -> tuple[str, list[str]]:
        # Wall time since the worker was started (its start-up included): the summary's
        # length is seconds of workload, so the reason says which clock it reads.
        at = f"after {self.stop_since:.1f} s (wall time, with the worker's start-up)"
        if self.stop_reason == "interrupted":
            return "interrupted", [f"interrupted (Ctrl-C or SIGTERM) {at}; the samples so far "
                                   "were analysed."]
        if self.stop_reason == "early stop":
            through = self.decided_through_s
            seen = (f" on the samples up to {through:.1f} s of workload, which the verdict is "
                    "judged on") if through is not None else ""
            return "stopped", [f"stopped early {at}: the early-stop condition held{seen}."]
        return "finished", []

    def _refusal(self) -> str:
        try:
            return (self.config.path / REFUSED_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            return f"the worker refused the run without saying why: {self._log_tail()}"

    def _log_tail(self) -> str:
        """The worker log's last line: Python's own start-up errors end up there."""
        path = self.config.path / WORKER_LOG
        try:
            lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        return f"{lines[-1].strip()} (see {path})." if lines else f"no output (see {path})."

    def _error(self) -> str:
        path = self.config.path / TRACEBACK_FILE
        try:
            lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        except OSError:
            return f"exit code {self.process.returncode}, no traceback written (see worker.log)."
        last = lines[-1].strip() if lines else "no message"
        return f"{last} (traceback in {path})."


FULL_BELOW = 256 << 10  # bytes free under which a folder's disk counts as full


def full_disk(folder: Path) -> str | None:
    """The sentence for a run folder whose disk is full, else None (or when unknown)."""
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    if free >= FULL_BELOW:
        return None
    return (f"the disk holding {folder} is full ({free >> 10} KB free): the worker could not "
            "write its samples, so the run cannot be judged; free space and run it again.")
