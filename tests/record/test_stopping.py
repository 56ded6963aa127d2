"""Stopping a recorded program: SIGKILL waits for recordings still being finished,
and a process cut short keeps a failure its samples already confirmed."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.parent.recording import recordings_finished, unfinished_recordings
from harness.parent.runner import cut_short
from harness.runfiles.names import PROCESS_PREFIX, SAMPLES_FILE

END = '{"type":"event","t":30.1,"name":"end","ops":5,"reason":"exit"}\n'
WARMUP_END = '{"type":"event","t":2.0,"name":"warmup_end","ops":0}\n'


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A live process to stand for a recorded one."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def recording(out: Path, pid: int, text: str) -> Path:
    folder = out / f"{PROCESS_PREFIX}{pid}"
    folder.mkdir(parents=True)
    (folder / SAMPLES_FILE).write_text(text)
    return folder / SAMPLES_FILE


def test_a_live_process_without_its_end_event_is_unfinished(tmp_path: Path,
                                                            sleeper: int) -> None:
    recording(tmp_path, sleeper, WARMUP_END)
    assert unfinished_recordings(tmp_path) == [sleeper]


def test_an_ended_recording_or_a_gone_process_is_not_waited_for(tmp_path: Path,
                                                                sleeper: int) -> None:
    recording(tmp_path, sleeper, WARMUP_END + END)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    recording(tmp_path, int(gone.stdout), WARMUP_END)
    assert unfinished_recordings(tmp_path) == []


def test_the_wait_ends_when_the_recording_does(tmp_path: Path, sleeper: int) -> None:
    samples = recording(tmp_path, sleeper, WARMUP_END)

    def finish() -> None:
        time.sleep(0.3)
        with samples.open("a") as out:
            out.write(END)

    writer = threading.Thread(target=finish)
    writer.start()
    began = time.monotonic()
    recordings_finished(tmp_path, 20.0, lambda: None)
    writer.join()
    assert 0.3 <= time.monotonic() - began < 10.0
    assert unfinished_recordings(tmp_path) == []


def test_the_wait_is_bounded_and_ends_with_the_program(tmp_path: Path, sleeper: int) -> None:
    recording(tmp_path, sleeper, WARMUP_END)
    began = time.monotonic()
    recordings_finished(tmp_path, 0.5, lambda: None)
    recordings_finished(tmp_path, 20.0, lambda: 0)  # the program exited with 0
    assert time.monotonic() - began < 5.0
    assert unfinished_recordings(tmp_path) == [sleeper]


def test_a_cut_short_run_keeps_a_confirmed_leak_and_never_passes() -> None:
    leaked = ["interrupted after 29 s."]
    assert cut_short("leak", leaked) == "leak"
    assert leaked[1] == "the partial data already confirmed: leak."
    for verdict in ("pass", "suspicious", "error"):
        reasons = ["interrupted after 3 s."]
        assert cut_short(verdict, reasons) == "interrupted"
        assert reasons[1] == f"the partial data showed: {verdict}."
