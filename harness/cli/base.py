"""What every subcommand shares: the Command protocol and SIGTERM taken as Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Protocol


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job's timeout) takes the Ctrl-C path: stop, analyse, report."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; Ctrl-C does not reach others
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Command(Protocol):
    """A subcommand: its class docstring is the help text (memray's shape)."""

    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...
