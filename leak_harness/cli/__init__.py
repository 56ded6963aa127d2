"""``leak-harness``: the command line over ``harness.parent.runner.run``.

One class per subcommand (its docstring is the help text), ``main(argv) -> int``.
Exit codes: 0 pass (or suspicious), 1 a failing verdict (leak, crashed, hung,
ceiling, error), 2 bad usage or input, 130 interrupted before a run started.
Bad input is one sentence on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from harness.errors import UsageError
from harness.verdicts import EXIT_HARNESS
from leak_harness.cli.base import EXIT_CODES, Command
from leak_harness.cli.check import CheckCommand
from leak_harness.cli.compare import CompareCommand
from leak_harness.cli.doctor import DoctorCommand
from leak_harness.cli.history import HistoryCommand
from leak_harness.cli.list import ListCommand
from leak_harness.cli.project_config import load_defaults
from leak_harness.cli.record import RecordCommand
from leak_harness.cli.report import ReportCommand
from leak_harness.cli.run import RunCommand

COMMANDS: tuple[Command, ...] = (
    ListCommand(),
    RunCommand(),
    CheckCommand(),
    ReportCommand(),
    CompareCommand(),
    HistoryCommand(),
    DoctorCommand(),
    RecordCommand(),
)


def harness_version() -> str:
    """The installed distribution's version (a source tree without metadata: unknown)."""
    try:
        return metadata.version("leak-harness")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help').")


def build_parser(defaults: dict[str, dict[str, Any]] | None = None) -> Parser:
    """The CLI; ``defaults``: per command, option defaults from the project's table."""
    parser = Parser(prog="leak-harness", description="Memory-leak regression harness.",
                    epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {harness_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        doc = inspect.cleandoc(type(command).__doc__ or "")
        sub = commands.add_parser(
            command.name,
            help=doc.split("\n\n")[0].replace("\n", " "),
            description=doc,
            epilog=EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.prepare_parser(sub)
        sub.set_defaults(handler=command.run, **(defaults or {}).get(command.name, {}))
    return parser


# Flags whose value may start with '-' (a negative number the user meant to pass,
# which argparse would take for a flag and answer "expected one argument").
VALUE_FLAGS = ("--duration", "--warmup", "--timeout", "--heartbeat", "--ops", "--seed", "-j",
               "--jobs", "--nights")


def attach_negative_values(argv: list[str]) -> list[str]:
    """``--duration -5s`` as ``--duration=-5s``, so the value's own check answers."""
    out: list[str] = []
    for token in argv:
        if out and out[-1] in VALUE_FLAGS and token[:1] == "-" and token[1:2].isdigit():
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def main(argv: list[str] | None = None) -> int:
    # A --target names a module in the user's folder, as ``python -m`` would find it; the
    # worker does the same (harness.worker.main). Last: installed packages win.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        args = build_parser(load_defaults(Path.cwd())).parse_args(attach_negative_values(
            sys.argv[1:] if argv is None else argv))
        code: int = args.handler(args)
        return code
    except UsageError as exc:
        print(f"leak-harness: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # a full disk, a read-only folder: the machine's words, no stack
        where = f" {exc.filename}" if exc.filename else ""
        print(f"leak-harness: could not write or read{where}: {exc.strerror or exc}.",
              file=sys.stderr)
        return EXIT_HARNESS
    except KeyboardInterrupt:
        print("leak-harness: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
