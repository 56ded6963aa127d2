"""The worker's main loop: step, count, poll the samplers, beat, report progress.

Kept apart from process set-up so it can be read (and tested) on its own. The
samplers, the heartbeat and the progress line are polled at most every
``POLL_S`` of the run's clock, not after every step: a round of polls costs
about 4 microseconds, 0.65% of a radix-steady step when done after each one;
the shortest interval any of them keeps is 0.1 s. Anything expensive a sampler
does happens only when its interval is due.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.api import Workload
from harness.control import StopRequest
from harness.worker.samplers.base import Clock, Every, Sampler, Sink

POLL_S = 0.01  # a sample is at most this late; the intervals are 0.1 s and longer


class ScenarioFailure(Exception):
    """The scenario's code raised (as opposed to the harness's); the cause is chained."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where  # "build", "gauges", "step" or "close"


@dataclass(frozen=True)
class Limits:
    duration_s: float | None
    max_ops: int | None
    warmup_s: float
    progress_s: float
    clock: Clock
    stop: StopRequest


@dataclass(frozen=True)
class LoopResult:
    ops: int
    reason: str  # "duration", "ops" or "stopped: <why>"


def finished(limits: Limits, now: float, ops: int) -> str | None:
    """Why the loop should end now, or None to go on."""
    if limits.stop.requested:
        return f"stopped: {limits.stop.why}"
    if limits.duration_s is not None and now >= limits.duration_s:
        return "duration"
    if limits.max_ops is not None and ops >= limits.max_ops:
        return "ops"
    return None


def drive(
    workload: Workload,
    samplers: Sequence[Sampler],
    limits: Limits,
    sink: Sink,
    beat: Callable[[float], None],
) -> LoopResult:
    """Run the workload until a limit or a stop request; return the op count."""
    progress = Progress(sink, limits.progress_s)
    warm = limits.warmup_s <= 0
    if warm:
        sink.event("warmup_end", 0.0, ops=0)
    ops = 0
    next_poll = 0.0
    while True:
        now = limits.clock()
        reason = finished(limits, now, ops)
        if reason is not None:
            progress.write(now, ops, "measure" if warm else "warmup")
            return LoopResult(ops, reason)
        try:
            ops += workload.step()
        except Exception as exc:
            raise ScenarioFailure("step") from exc
        now = limits.clock()
        if not warm and now >= limits.warmup_s:
            warm = True  # warm-up samples are kept; analysis starts here
            sink.event("warmup_end", now, ops=ops)
        if now < next_poll:
            continue
        next_poll = now + POLL_S
        for sampler in samplers:
            sampler.poll(now, ops)
        beat(now)
        progress.poll(now, ops, "measure" if warm else "warmup")


class Progress:
    """A ``progress`` line about once a second: ops so far and the recent rate."""

    def __init__(self, sink: Sink, interval_s: float) -> None:
        self._sink = sink
        self._every = Every(interval_s, first_at=interval_s)
        self._last_t = 0.0
        self._last_ops = 0

    def poll(self, now: float, ops: int, phase: str) -> None:
        if self._every.due(now):
            self.write(now, ops, phase)

    def write(self, now: float, ops: int, phase: str) -> None:
        span = now - self._last_t
        rate = (ops - self._last_ops) / span if span > 0 else 0.0
        self._sink.sample("progress", now, ops=ops, ops_per_s=round(rate, 1), phase=phase)
        self._last_t, self._last_ops = now, ops
