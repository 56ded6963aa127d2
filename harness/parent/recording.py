"""The parent side of ``leak-harness record``: run the program, stop it, judge each process.

The program runs in its own session with the recorder's ``sitecustomize`` on
PYTHONPATH (:mod:`harness.record.bootstrap`; the names both sides read are in
:mod:`harness.record.env`); its output is shown and kept in
``program.log``. It ends by itself, or after ``duration_s`` it is asked to stop
with SIGINT, then SIGTERM, then SIGKILL, ``grace_s`` apart, its whole process
group with it. Before the first signal a stop notice asks every recorder to end
its recording (final windows included) while the program still runs, so its
teardown is not judged; SIGKILL waits too while a recorded process still
writes its final windows (up to ``FINISH_WAIT_S`` each time). Then every
``proc-<pid>`` folder is concluded like a worker's run folder: the same
analysis, verdicts and summary.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from harness.config import RunConfig
from harness.errors import UsageError
from harness.parent.runner import RunOutcome, conclude
from harness.parent.supervisor import Ending
from harness.parent.watchdog import still_running
from harness.provenance import REPO_ROOT
from harness.record.env import ENV, SITE_DIR
from harness.runfiles.fatal import died_from
from harness.runfiles.names import (
    CONFIG_FILE,
    PROCESS_PREFIX,
    PROGRAM_LOG,
    SAMPLES_FILE,
    STOP_FILE,
)
from harness.runfiles.reader import load_samples
from harness.runfiles.rundata import RunData
from harness.verdicts import INTERRUPTED

PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
KILL_WAIT_S = 10.0
# A recorded process that got the stop signals writes its final windows (garbage,
# owner search, trim probe: up to seconds on a loaded machine) before it exits;
# SIGKILL waits this much longer for them, then cuts them short.
FINISH_WAIT_S = 30.0
END_EVENT = re.compile(rb'"name":"end"[,}]')
# How bad a process's verdict is for the recording as a whole (the worst wins): a
# confirmed failure outranks a cut-short process, which never lets the whole pass.
RANK = {"pass": 0, "suspicious": 1, INTERRUPTED: 2, "error": 3, "leak": 4,
        "crashed": 5, "hung": 5, "ceiling": 5}


@dataclass(frozen=True)
class Program:
    argv: list[str]  # what runs: this interpreter, so the recorder can be imported
    shown: str  # as the user typed it

    @property
    def name(self) -> str:
        """The script's or module's name, for folder names."""
        if self.argv[1:2] == ["-m"]:
            return self.argv[2].rsplit(".", 1)[-1]
        main = self.argv[1]
        return Path(main).stem if not main.startswith("-") else "python"


def program_from(command: Sequence[str]) -> Program:
    """The program after ``--``; a UsageError in one sentence when it cannot be recorded."""
    cmd = list(command[1:] if command[:1] == ["--"] else command)
    if not cmd:
        raise UsageError("record needs a program after '--', like: leak-harness record -- "
                         "python app.py")
    shown = " ".join(cmd)
    head, rest = cmd[0], cmd[1:]
    if head == "-m":
        if not rest:
            raise UsageError("'-m' needs a module name, like: leak-harness record -- -m myserver")
        return Program([sys.executable, "-m", *rest], shown)
    if PYTHON_NAME.match(Path(head).name):
        if rest and not rest[0].startswith("-"):
            script_exists(rest[0])
        if not rest:
            raise UsageError(f"'{shown}' names no program to run: give a script or -m module.")
        return Program([sys.executable, *rest], shown)
    path = Path(head) if Path(head).exists() else Path(shutil.which(head) or head)
    script_exists(str(path))
    if path.suffix != ".py" and not python_shebang(path):
        raise UsageError(f"'{head}' is not a Python program; record runs Python: "
                         "python app.py, -m package, or a script with a python shebang.")
    return Program([sys.executable, str(path), *rest], shown)


def script_exists(name: str) -> None:
    if not Path(name).is_file():
        raise UsageError(f"the program {name!r} does not exist.")


def python_shebang(path: Path) -> bool:
    try:
        with path.open("rb") as script:
            first = script.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def recording_env(out: Path, follow: bool, config: RunConfig) -> dict[str, str]:
    env = dict(os.environ)
    # Absolute paths only: the program may chdir before a child starts recording.
    env[ENV] = json.dumps({"out": str(out.absolute()), "follow": follow,
                           "config": config.to_dict()})
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *paths, str(REPO_ROOT)])
    return env


@dataclass(frozen=True)
class Stopped:
    """How the program ended: ``exited`` by itself, stopped after the ``duration``,
    or ``interrupted`` (Ctrl-C or SIGTERM to the harness)."""

    how: str
    exit_code: int | None
    signals: tuple[str, ...]  # sent to stop it, in order
    wall_s: float
    pid: int


def run_program(program: Program, env: dict[str, str], out: Path, duration_s: float | None,
                grace_s: float, cancel: threading.Event, echo: IO[bytes] | None) -> Stopped:
    """Run the program to its end, or stop it; its output goes to ``echo`` and the log."""
    began = time.monotonic()
    with (out / PROGRAM_LOG).open("wb") as log:
        process = subprocess.Popen(program.argv, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        assert process.stdout is not None
        tee = threading.Thread(target=copy_output, args=(process.stdout, log, echo), daemon=True)
        tee.start()
        how = wait_for(process, began, duration_s, cancel)
        sent: tuple[str, ...] = ()
        if process.poll() is None:
            give_notice(out, process)
            sent = stop_group(process, grace_s, out)
        end_group(process.pid, grace_s, out)  # children that outlived the program
        tee.join(KILL_WAIT_S)
        (out / STOP_FILE).unlink(missing_ok=True)
    return Stopped(how, process.returncode, sent, time.monotonic() - began, process.pid)


def copy_output(source: IO[bytes], log: IO[bytes], echo: IO[bytes] | None) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(chunk)
        log.flush()
        if echo is not None:
            echo.write(chunk)
            echo.flush()


def wait_for(process: subprocess.Popen[bytes], began: float, duration_s: float | None,
             cancel: threading.Event) -> str:
    while process.poll() is None:
        if cancel.wait(0.1):
            return INTERRUPTED
        if duration_s is not None and time.monotonic() - began >= duration_s:
            return "duration"
    return "exited"


def give_notice(out: Path, process: subprocess.Popen[bytes]) -> None:
    """Tell the recorders the program is about to be stopped, and wait (up to
    FINISH_WAIT_S) while they end their recordings: their final windows see the
    program as it ran, not its teardown."""
    (out / STOP_FILE).touch()
    recordings_finished(out, FINISH_WAIT_S, process.poll)


def stop_group(process: subprocess.Popen[bytes], grace_s: float,
               out: Path) -> tuple[str, ...]:
    """SIGINT, then SIGTERM, then SIGKILL to the program's process group, ``grace_s`` apart
    (SIGKILL once no recording in ``out`` is still being finished, or FINISH_WAIT_S on)."""
    sent: list[str] = []
    for sig in STOP_SIGNALS:
        if sig == signal.SIGKILL:
            recordings_finished(out, FINISH_WAIT_S, process.poll)
            if process.poll() is not None:
                break  # its children, if any, are end_group's
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        sent.append(sig.name)
        try:
            process.wait(KILL_WAIT_S if sig == signal.SIGKILL else grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    return tuple(sent)


def end_group(pgid: int, grace_s: float, out: Path) -> None:
    """Children left in the program's group get SIGTERM, then SIGKILL after ``grace_s``
    (and after their recordings in ``out`` are finished, or FINISH_WAIT_S on)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if sig == signal.SIGKILL:
            recordings_finished(out, FINISH_WAIT_S, lambda: None)
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def recordings_finished(out: Path, wait_s: float, ended: Callable[[], object]) -> None:
    """Wait up to ``wait_s`` until every live recorded process in ``out`` has written its
    ``end`` event, or ``ended()`` is no longer None (the program is gone)."""
    deadline = time.monotonic() + wait_s
    while unfinished_recordings(out) and ended() is None and time.monotonic() < deadline:
        time.sleep(0.1)


def unfinished_recordings(out: Path) -> list[int]:
    """Pids of processes still alive whose recording has no ``end`` event yet."""
    found = []
    for folder in out.glob(f"{PROCESS_PREFIX}*"):
        pid = folder.name.removeprefix(PROCESS_PREFIX)
        if pid.isdigit() and alive(int(pid)) and not ends_recorded(folder / SAMPLES_FILE):
            found.append(int(pid))
    return found


def alive(pid: int) -> bool:
    try:
        return still_running(psutil.Process(pid))
    except psutil.Error:
        return False


def ends_recorded(samples: Path) -> bool:
    """Whether the last lines of ``samples`` hold the ``end`` event."""
    try:
        with samples.open("rb") as stream:
            stream.seek(max(stream.seek(0, os.SEEK_END) - 4096, 0))
            return END_EVENT.search(stream.read()) is not None
    except OSError:
        return True  # no recording to wait for


@dataclass(frozen=True)
class Recorded:
    pid: int
    argv: str
    outcome: RunOutcome
    is_program: bool


def conclude_processes(out: Path, stopped: Stopped, command: str) -> list[Recorded]:
    """Analyse every recorded process and write its summary; the program first."""
    found = []
    for folder in sorted(out.glob(f"{PROCESS_PREFIX}*")):
        if not (folder / SAMPLES_FILE).exists():
            continue
        data = load_samples(folder / SAMPLES_FILE)
        config = RunConfig.from_dict(json.loads((folder / CONFIG_FILE).read_text("utf-8")))
        config = warmed_up(config, data)
        start = data.event("start")
        pid = int(start.get("pid", folder.name.removeprefix(PROCESS_PREFIX)) if start
                  else folder.name.removeprefix(PROCESS_PREFIX))
        ending = (program_ending(stopped, out / PROGRAM_LOG) if pid == stopped.pid
                  else child_ending(data, pid))
        argv = " ".join(str(a) for a in (start.get("argv", []) if start else []))
        found.append(Recorded(pid, argv, conclude(config, ending, command), pid == stopped.pid))
    return sorted(found, key=lambda r: (not r.is_program, r.pid))


def warmed_up(config: RunConfig, data: RunData) -> RunConfig:
    """The warm-up counts from the program's ``ready()`` when it called it."""
    ready = data.event("ready")
    if ready is None:
        return config
    return dataclasses.replace(config, warmup_s=float(ready["t"]) + config.warmup_s)


def program_ending(stopped: Stopped, log: Path) -> Ending:
    code = f"exit code {stopped.exit_code}"
    if stopped.how == INTERRUPTED:
        return Ending(INTERRUPTED, [f"interrupted (Ctrl-C or SIGTERM) after {stopped.wall_s:.0f} "
                                    f"s; the samples so far were analysed ({code})."],
                      stopped.exit_code, stopped.wall_s)
    if stopped.how == "duration":
        how = ", then ".join(stopped.signals) or "a signal"
        return Ending("finished", [f"recorded {stopped.wall_s:.0f} s, then stopped with {how} "
                                   f"({code})."], stopped.exit_code, stopped.wall_s)
    if stopped.exit_code is not None and stopped.exit_code < 0:
        return Ending("crashed", [died_from(-stopped.exit_code, "the program", log,
                                            stopped.wall_s)],
                      stopped.exit_code, stopped.wall_s)
    if stopped.exit_code not in (0, None):
        return Ending("crashed", [f"the program exited with {code} after "
                                  f"{stopped.wall_s:.1f} s (its output: {PROGRAM_LOG})."],
                      stopped.exit_code, stopped.wall_s)
    return Ending("finished", [f"the program ended by itself after {stopped.wall_s:.1f} s "
                               f"({code})."], stopped.exit_code, stopped.wall_s)


def child_ending(data: RunData, pid: int) -> Ending:
    end = data.event("end")
    if end is None:
        return Ending(INTERRUPTED, [f"process {pid} ended before its recording did (killed?); "
                                    "the samples so far were analysed."], None, 0.0)
    return Ending("finished", [f"process {pid} ended after {float(end['t']):.0f} s."], None,
                  float(end["t"]))


def overall_verdict(processes: Sequence[Recorded]) -> str:
    return max((p.outcome.verdict for p in processes), key=lambda v: RANK.get(v, 3),
               default="error")
