"""Start a recorder in this process when ``leak-harness record`` asked for one.

``leak-harness record`` runs the program with ``harness/record/site`` first on
PYTHONPATH and the environment variable ``LEAK_HARNESS_RECORD`` set to JSON:
``{"out": folder, "follow": bool, "config": RunConfig dict}``. Python imports
that folder's ``sitecustomize`` at start-up, which calls
:func:`start_from_environment`: the recorder writes into
``<out>/proc-<pid>/``.

Children: without ``follow`` the variable and the folder are taken out of
this process's environment at once, so nothing it starts is recorded. With
it, a Python child started by ``subprocess`` or multiprocessing's spawn
inherits both and records itself; a forked child (``os.fork``,
multiprocessing's fork) abandons its copy of the parent's recorder and starts
its own. Each ends its recording at exit (``atexit``), on SIGTERM (taken as
a normal exit when the program has no handler of its own), and, since
multiprocessing's children leave through ``os._exit``, through a
multiprocessing finaliser.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib.util
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

from harness.config import RunConfig
from harness.record.env import ENV, SITE_DIR
from harness.record.recorder import Recorder
from harness.runfiles.names import CONFIG_FILE

FAILED_FILE = "record-failed.txt"
MP_EXIT_PRIORITY = 100  # multiprocessing finalisers of priority >= 0 run at a child's exit

_active: Recorder | None = None
_hooks_installed = False


def start_from_environment() -> None:
    raw = os.environ.get(ENV)
    if not raw:
        return
    try:
        settings = json.loads(raw)
    except ValueError:
        return
    if not settings.get("follow"):
        forget_environment()
    try:
        start(settings)
    except Exception:  # recording must never cost the program its run
        note_failure(settings)


def start(settings: dict[str, Any]) -> Recorder:
    """A recorder for this process, in ``<out>/proc-<pid>``."""
    global _active
    folder = Path(settings["out"]) / f"proc-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    config = RunConfig.from_dict({**settings["config"], "rundir": str(folder)})
    config.dump(folder / CONFIG_FILE)
    show_fatal_errors()
    recorder = Recorder(folder, config)
    recorder.start()
    _active = recorder
    install_exit_hooks(settings)
    if in_multiprocessing_child():
        finalize_at_multiprocessing_exit(recorder)
    return recorder


def show_fatal_errors() -> None:
    """faulthandler on the program's stderr (``program.log``), unless the program set it up
    itself: a segfault then names the frame it died in, every thread's stack beside it,
    instead of an exit code alone (a crash under the recorder's threads must be seen)."""
    if not faulthandler.is_enabled() and sys.stderr is not None:
        # A stderr without a descriptor cannot take it; the recording goes on.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            faulthandler.enable(all_threads=True)


def stop_active(reason: str = "exit") -> None:
    if _active is not None:
        _active.stop(reason)


def install_exit_hooks(settings: dict[str, Any]) -> None:
    """Once per process tree: atexit, SIGTERM, and a new recorder in forked children."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(stop_active, "exit")
    take_sigterm()
    if settings.get("follow"):
        os.register_at_fork(after_in_child=lambda: forked(settings))


def take_sigterm() -> None:
    """SIGTERM ends the program as an exit would, unless the program handles it itself."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, exit_on_sigterm)


def exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


exit_on_sigterm.ends_recording = True  # type: ignore[attr-defined]  # its exit stops the recorder


def forked(settings: dict[str, Any]) -> None:
    """In a forked child: the parent's recorder is not ours to write; start our own."""
    if _active is not None:
        _active.abandon()
    try:
        recorder = start(settings)
    except Exception:
        note_failure(settings)
        return
    if "multiprocessing.util" in sys.modules:  # a multiprocessing child leaves by os._exit
        finalize_at_multiprocessing_exit(recorder)


def in_multiprocessing_child() -> bool:
    """A child multiprocessing spawned (or a forkserver started)."""
    return any("multiprocessing" in arg for arg in getattr(sys, "orig_argv", sys.argv))


def finalize_at_multiprocessing_exit(recorder: Recorder) -> None:
    """Stop ``recorder`` in multiprocessing's exit path.

    A child's bootstrap clears the finaliser registry before the target runs,
    then runs its after-fork callbacks: registering from one of those survives.
    """
    from multiprocessing import util

    def register(rec: Recorder) -> None:
        util.Finalize(None, rec.stop, args=("exit",), exitpriority=MP_EXIT_PRIORITY)

    util.register_after_fork(recorder, register)
    register(recorder)  # and now, for an exit that skips the bootstrap's clean-up


def forget_environment() -> None:
    """Nothing this process starts is recorded (no ``--follow-children``)."""
    os.environ.pop(ENV, None)
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != SITE_DIR]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)


def note_failure(settings: dict[str, Any]) -> None:
    try:
        folder = Path(settings["out"])
        folder.mkdir(parents=True, exist_ok=True)
        text = f"pid {os.getpid()}: could not record:\n{traceback.format_exc()}"
        with (folder / FAILED_FILE).open("a", encoding="utf-8") as out:
            out.write(text)
    except Exception:
        pass


def chain_sitecustomize(this_file: str) -> None:
    """Run the ``sitecustomize`` that ours shadows, if one is further down ``sys.path``."""
    ours = Path(this_file).resolve().parent
    for entry in sys.path:
        if not entry or Path(entry).resolve() == ours:
            continue
        candidate = Path(entry) / "sitecustomize.py"
        if candidate.is_file():
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return
