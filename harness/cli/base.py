"""What every subcommand shares: the Command protocol and SIGTERM taken as Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Protocol


@contextmanager
def interrupts(cancel: threading.Event | None = None) -> Iterator[None]:
    """Ctrl-C and SIGTERM (a CI job's timeout) take the same path: stop, analyse, report.

    Each signal raises KeyboardInterrupt, and also sets ``cancel``, which the
    supervisor checks every tick: an exception raised while the interpreter
    runs a finaliser or a callback is printed and dropped ("Exception
    ignored in ..."), and a Ctrl-C must not be lost that way.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; Ctrl-C does not reach others
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if cancel is not None:
            cancel.set()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Command(Protocol):
    """A subcommand: its class docstring is the help text (memray's shape)."""

    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...
