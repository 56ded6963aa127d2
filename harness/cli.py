"""``leak-harness``: the command line over ``harness.runner.run``.

One class per subcommand (its docstring is the help text), ``main(argv) -> int``.
Exit codes: 0 pass (or suspicious), 1 a failing verdict (leak, crashed, hung,
ceiling, error), 2 bad usage or input, 130 interrupted before a run started.
Bad input is one sentence on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import inspect
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import NoReturn, Protocol

from harness.commands.check import CheckCommand
from harness.commands.history import HistoryCommand
from harness.commands.report import CompareCommand, ReportCommand
from harness.display import ProgressLine
from harness.errors import UsageError
from harness.registry import list_scenarios
from harness.runargs import add_run_arguments, config_from_args
from harness.runner import prepare_rundir, run

PASSING = ("pass", "suspicious")


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
    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class RunCommand:
    """Run one scenario in a fresh worker process, print its verdict and reasons, and
    write the run folder (samples.jsonl, summary.json, report.html with plots).

    examples:
      leak-harness run mamba-lru --inject mamba-lru-unlink --duration 30s
      leak-harness run radix-steady --target examples.own_cache:make --budget 'rss: 20 MB/h'
      leak-harness run mamba-lru --gc-mode server --duration 10m   # rare gen-2, RSS climbs
    """

    name = "run"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_run_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        scenario, config = config_from_args(args)
        prepare_rundir(config)  # an unwritable --out fails before anything is printed
        line = ProgressLine(sys.stdout, scenario.name, live=sys.stdout.isatty())
        line.begin(config)
        try:
            with sigterm_as_interrupt():
                outcome = run(config, on_progress=line.update)
        finally:
            line.end()
        print(f"{scenario.name}: {outcome.verdict}")
        for reason in outcome.reasons:
            print(f"  - {reason}")
        print(f"run folder: {outcome.rundir}")
        print(f"report: {write_report(outcome.rundir)}")
        return 0 if outcome.verdict in PASSING else 1


def write_report(rundir: Path) -> Path:
    from reports.run_report import write_run_report  # lazy: matplotlib stays off the run path

    return write_run_report(rundir)


class ListCommand:
    """List the scenarios with their descriptions and the regressions they catch.

    example:
      leak-harness list
    """

    name = "list"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        listings = list_scenarios()
        if not listings:
            print("no scenarios found in the 'scenarios' package.")
        for item in listings:
            if item.scenario is None:
                print(f"{item.name}\n    cannot be loaded: {item.error}")
                continue
            regressions = ", ".join(item.scenario.regressions) or "none"
            print(f"{item.name}\n    {item.scenario.description}\n    regressions: {regressions}")
        return 0


COMMANDS: tuple[Command, ...] = (
    ListCommand(),
    RunCommand(),
    CheckCommand(),
    ReportCommand(),
    CompareCommand(),
    HistoryCommand(),
)


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help').")


def build_parser() -> Parser:
    parser = Parser(prog="leak-harness", description="Memory-leak regression harness.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        doc = inspect.cleandoc(type(command).__doc__ or "")
        sub = commands.add_parser(
            command.name,
            help=doc.split("\n\n")[0].replace("\n", " "),
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.prepare_parser(sub)
        sub.set_defaults(handler=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code: int = args.handler(args)
        return code
    except UsageError as exc:
        print(f"leak-harness: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("leak-harness: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
