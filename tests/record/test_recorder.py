"""The recorder in this process: what it writes, the hooks, a forked child's copy."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import record
from harness.config import RunConfig, SamplerIntervals
from harness.record.recorder import Recorder
from harness.runfiles.names import SAMPLES_FILE


@pytest.fixture
def hooks() -> Iterator[record.Hooks]:
    saved = record.HOOKS
    record.HOOKS = record.Hooks()
    import harness.record.recorder as recorder_module

    recorder_module.HOOKS = record.HOOKS  # the recorder reads the same object
    yield record.HOOKS
    record.HOOKS = recorder_module.HOOKS = saved


def lines(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / SAMPLES_FILE).read_text().splitlines()]


def config(folder: Path) -> RunConfig:
    return RunConfig(scenario="record", rundir=str(folder), duration_s=None, max_ops=10**9,
                     warmup_s=0.2, samplers=("heap", "gauges"),
                     intervals=SamplerIntervals(heap_s=0.05, gauges_s=0.05))


def test_the_recorder_samples_from_its_thread_and_writes_the_hooks(
    tmp_path: Path, hooks: record.Hooks
) -> None:
    recorder = Recorder(tmp_path, config(tmp_path))
    recorder.start()
    record.gauge("queue", lambda: 4.0)
    record.gauge("lost", lambda: 3.0, at_idle=True)
    record.ready()
    for _ in range(20):
        record.ops(5)
        record.idle()
        time.sleep(0.02)
    record.scenario("radix-steady")
    recorder.stop("exit")
    recorder.stop("again")  # once only
    found = lines(tmp_path)
    events = [e["name"] for e in found if e["type"] == "event"]
    assert events[0] == "start" and events[-1] == "end" and events.count("end") == 1
    assert {"ready", "warmup_end", "scenario", "loop_end"} <= set(events)
    gauges = [g["values"] for g in found if g["type"] == "gauges"]
    assert any(v.get("queue") == 4.0 for v in gauges)  # type: ignore[union-attr]
    assert sum(1 for v in gauges if v == {"lost": 3.0}) >= 10  # one line per idle() call
    assert len([h for h in found if h["type"] == "heap"]) >= 5
    assert found[-1]["ops"] == 100 and not record.recording()


def test_a_forked_childs_copy_writes_nothing_and_unhooks_its_callbacks(
    tmp_path: Path, hooks: record.Hooks
) -> None:
    import gc

    folder = tmp_path / "parent"
    folder.mkdir()
    recorder = Recorder(folder, RunConfig(scenario="record", rundir=str(folder),
                                          duration_s=None, max_ops=10**9, samplers=("gc",)))
    recorder.start()
    assert any(getattr(cb, "__self__", None) in recorder.samplers for cb in gc.callbacks)
    before = (folder / SAMPLES_FILE).read_text()
    recorder.abandon()  # what a forked child does with the copy it inherited
    recorder.stop("exit")
    assert (folder / SAMPLES_FILE).read_text() == before
    assert not any(getattr(cb, "__self__", None) in recorder.samplers for cb in gc.callbacks)


def test_the_stop_notice_ends_the_recording_while_the_program_runs(
    tmp_path: Path, hooks: record.Hooks
) -> None:
    from harness.runfiles.names import STOP_FILE

    folder = tmp_path / "proc-1"
    folder.mkdir()
    recorder = Recorder(folder, config(folder))
    recorder.start()
    time.sleep(0.4)
    (tmp_path / STOP_FILE).touch()  # what leak-harness record does before SIGINT
    deadline = time.monotonic() + 10
    while '"name":"end"' not in (folder / SAMPLES_FILE).read_text():
        assert time.monotonic() < deadline, "the notice did not end the recording"
        time.sleep(0.05)
    record.ops(7)  # the program goes on; nothing more is written
    recorder.stop("exit")  # its exit later: already ended
    found = lines(folder)
    events = [e for e in found if e["type"] == "event"]
    assert [e["reason"] for e in events if e["name"] in ("loop_end", "end")] == \
        ["stop notice", "stop notice"]
    assert found[-1]["name"] == "end" and 0.4 <= float(found[-1]["t"]) < 5  # type: ignore[arg-type]
