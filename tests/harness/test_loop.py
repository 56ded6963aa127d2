"""The worker's loop and GC modes, in-process: limits, warm-up, stop, gen-2 rarity."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from harness.api import Gauge
from harness.control import StopRequest
from harness.worker.loop import Limits, ScenarioFailure, drive


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Stepper:
    """Each step does 3 ops and advances the fake clock by 10 ms."""

    def __init__(self, clock: Clock, fail_at: int | None = None) -> None:
        self.clock, self.fail_at, self.steps = clock, fail_at, 0

    def step(self) -> int:
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError("boom")
        self.clock.now += 0.01
        return 3

    def gauges(self) -> Mapping[str, Gauge]:
        return {}

    def close(self) -> None:
        pass


class Sink:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def line(self, record: Mapping[str, Any]) -> None:
        self.lines.append(dict(record))

    def sample(self, kind: str, t: float, **fields: Any) -> None:
        self.lines.append({"type": kind, "t": t, **fields})

    def event(self, name: str, t: float, **fields: Any) -> None:
        self.lines.append({"type": "event", "name": name, "t": t, **fields})


def limits(clock: Clock, stop: StopRequest | None = None, **kw: Any) -> Limits:
    values: dict[str, Any] = {"duration_s": 1.0, "max_ops": None, "warmup_s": 0.25,
                              "progress_s": 0.5}
    values.update(kw)
    return Limits(clock=clock, stop=stop or StopRequest(), **values)


def test_duration_limit_marks_warmup_and_writes_progress() -> None:
    clock, sink, beats = Clock(), Sink(), []
    result = drive(Stepper(clock), [], limits(clock), sink, beats.append)
    assert result.reason == "duration" and result.ops == 300  # 100 steps of 10 ms
    (warm,) = [line for line in sink.lines if line.get("name") == "warmup_end"]
    assert warm["t"] == pytest.approx(0.25) and warm["ops"] == 75
    progress = [line for line in sink.lines if line["type"] == "progress"]
    assert [p["phase"] for p in progress] == ["measure", "measure", "measure"]
    assert progress[0]["ops_per_s"] == pytest.approx(300.0) and len(beats) == 100


def test_op_limit_and_stop_request_end_the_loop() -> None:
    clock = Clock()
    assert drive(Stepper(clock), [], limits(clock, duration_s=None, max_ops=30), Sink(),
                 lambda now: None).reason == "ops"
    stop = StopRequest()
    clock = Clock()

    def beat(now: float) -> None:
        if now >= 0.5:
            stop.set("stop file")

    result = drive(Stepper(clock), [], limits(clock, stop), Sink(), beat)
    assert result.reason == "stopped: stop file" and result.ops == 150


def test_a_failing_step_is_the_scenarios_failure() -> None:
    clock = Clock()
    with pytest.raises(ScenarioFailure) as caught:
        drive(Stepper(clock, fail_at=5), [], limits(clock), Sink(), lambda now: None)
    assert caught.value.where == "step" and isinstance(caught.value.__cause__, ValueError)


GEN2_PROBE = """
import gc, sys
from harness.worker.gcmode import apply_gc_mode
info, ballast = apply_gc_mode(sys.argv[1], 1_000_000)
full = []
gc.callbacks.append(lambda phase, i: full.append(1) if phase == "stop" and i["generation"] == 2
                    else None)
keep = []
for i in range(200_000):
    keep.append([i])  # 200k survivors: under a quarter of the 1M ballast
print(len(full), info["enabled"])
"""


def gen2_collections(mode: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", GEN2_PROBE, mode], capture_output=True,
                          text=True, check=True, timeout=60)
    count, enabled = done.stdout.split()
    return int(count), enabled


def test_server_mode_makes_full_collections_rare() -> None:
    default_full, _ = gen2_collections("default")
    server_full, server_enabled = gen2_collections("server")
    off_full, off_enabled = gen2_collections("off")
    assert default_full >= 1 and server_full == 0 and server_enabled == "True"
    assert off_full == 0 and off_enabled == "False"
    assert gc.isenabled()  # the probes ran in their own processes
