"""What every subcommand shares: the Command protocol, SIGTERM taken as Ctrl-C, and
the helpers several faces use (the target's form, run folder names, the run report).

Faces share through this module, never by importing each other's commands.
"""

from __future__ import annotations

import argparse
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

from harness.api import BUILTIN_TARGETS, is_target_spec
from harness.errors import UsageError
from harness.runfiles.reader import LoadedRun

RESULTS_DIR = Path("results") / "runs"


class Signals:
    """Which signal stopped the command, for its exit code (128 + the signal number)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def exit_code(self, verdict_code: int) -> int:
        """A stopped command exits 130 (SIGINT) or 143 (SIGTERM), whatever it found."""
        return 128 + self.signum if self.signum is not None else verdict_code


@contextmanager
def interrupts(
    cancel: threading.Event | None = None, raise_interrupt: bool = True
) -> Iterator[Signals]:
    """Ctrl-C and SIGTERM (a CI job's timeout) take the same path: stop, analyse, report.

    Each signal sets ``cancel``, which the supervisor checks every tick, and
    by default raises KeyboardInterrupt too: an exception raised while the
    interpreter runs a finaliser or a callback is printed and dropped
    ("Exception ignored in ..."), and a Ctrl-C must not be lost that way.
    ``raise_interrupt=False`` only sets ``cancel``: for ``check``, whose main
    thread waits on cells that each stop through ``cancel`` and still land.
    """
    seen = Signals()
    if threading.current_thread() is not threading.main_thread():
        yield seen  # only the main thread may set handlers; Ctrl-C does not reach others
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        seen.signum = seen.signum or signum
        if cancel is not None:
            cancel.set()
        if raise_interrupt or cancel is None:
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Command(Protocol):
    """A subcommand: its class docstring is the help text (memray's shape)."""

    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def check_target_spec(target: str | None, where: str = "--target") -> None:
    """The form of ``--target`` (whether it imports, the worker says before it runs);
    ``where`` names the value's source in the sentence."""
    if target is not None and not is_target_spec(target):
        raise UsageError(f"{where} {target!r} is not 'module:callable' nor a built-in target "
                         f"({', '.join(BUILTIN_TARGETS)}).")


def target_import_hint(exc: BaseException, target: str) -> str:
    """A sentence to add when ``target``'s own module is not found: module:callable
    targets are imported from the working folder (then PYTHONPATH), so a run from
    another folder does not see the package; empty for any other failure."""
    module = BUILTIN_TARGETS.get(target, target).partition(":")[0]
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not missing or not (module == missing or module.startswith(missing + ".")):
        return ""
    return (f" A target is imported from the folder leak-harness runs in ({Path.cwd()}), "
            f"then PYTHONPATH: run it from the folder that holds {missing.split('.')[0]!r}, "
            "or put that folder on PYTHONPATH (docs/own-cache.md).")


def default_rundir(name: str) -> Path:
    """A new folder under ``results/runs`` named after ``name`` and the time."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = RESULTS_DIR / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{stamp}"
    candidate, n = base, 1
    while candidate.exists():  # two runs in the same second
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def write_report(loaded: LoadedRun) -> Path:
    """The run's ``report.html``, in its folder. Raises OSError when the folder takes no
    more (a full disk, a read-only folder)."""
    from reports.run import write_run_report  # lazy: matplotlib stays off the run path

    return write_run_report(loaded)


def report_line(loaded: LoadedRun) -> str:
    """``report: <path>``, or why it could not be written: the verdict printed before it
    stands (its samples and summary are on disk), so a full disk costs the plots only."""
    try:
        return f"report: {write_report(loaded)}"
    except OSError as exc:
        return (f"report: not written ({exc.strerror or exc}); the verdict above stands, its "
                f"samples and summary are in {loaded.rundir}")


WHERE_SHOWN = 3  # lines of "Where it grows" printed unless --where all


def add_where_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--where", choices=("top", "all"), default="top",
                        help=f"'Where it grows': the {WHERE_SHOWN} most certain lines (top, "
                             "the default) or every line (all)")


def print_where(where: list[str], show: str, indent: str = "") -> None:
    """The "Where it grows" lines, most certain first, cut to WHERE_SHOWN unless ``all``."""
    if not where:
        return
    shown = where if show == "all" else where[:WHERE_SHOWN]
    print(f"{indent}where it grows:")
    print("\n".join(f"{indent}  - {line}" for line in shown))
    if len(shown) < len(where):
        print(f"{indent}  ({len(where) - len(shown)} less certain line"
              f"{'s' * (len(where) - len(shown) != 1)}: --where all, or the report)")



EXIT_CODES = """exit codes:
  0    pass (and suspicious, unless --strict)
  1    a regression: leak, crashed, hung, ceiling (check: a wrong cell or a flagged
       history row; doctor: the cache does not conform)
  2    usage: bad input, one sentence on stderr, nothing run
  3    the harness could not judge (error)
  130  interrupted by Ctrl-C (143: SIGTERM)"""


def add_strict_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 on suspicious too (a trend the run could not confirm)")
