"""``leak-harness``: the command line over ``harness.parent.runner.run``.

One class per subcommand (its docstring is the help text), ``main(argv) -> int``.
Exit codes: 0 pass (or suspicious), 1 a failing verdict (leak, crashed, hung,
ceiling, error), 2 bad usage or input, 130 interrupted before a run started.
Bad input is one sentence on stderr, never a traceback.

A command's module is imported only when that command runs or shows its help, so a
start loads the layers of one command (``--version`` loads none of them).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from harness.errors import UsageError
from harness.verdicts import EXIT_HARNESS
from leak_harness.cli.project_config import load_defaults

if TYPE_CHECKING:
    from leak_harness.cli.base import Command

DESCRIPTION = "Memory-leak regression harness."
# Every command, in the order ``--help`` lists them: its name -> "module:class".
COMMANDS: dict[str, str] = {
    "list": "leak_harness.cli.list:ListCommand",
    "run": "leak_harness.cli.run:RunCommand",
    "check": "leak_harness.cli.check:CheckCommand",
    "report": "leak_harness.cli.report:ReportCommand",
    "compare": "leak_harness.cli.compare:CompareCommand",
    "history": "leak_harness.cli.history:HistoryCommand",
    "doctor": "leak_harness.cli.doctor:DoctorCommand",
    "record": "leak_harness.cli.record:RecordCommand",
}


def load_command(name: str) -> Command:
    """The command ``name``, its module imported now."""
    module, _, cls = COMMANDS[name].partition(":")
    command: Command = getattr(importlib.import_module(module), cls)()
    return command


def doc_of(command: Command) -> str:
    """A command's help text: its class docstring."""
    return inspect.cleandoc(type(command).__doc__ or "")


def exit_codes() -> str:
    """The exit-code table every help ends with."""
    from leak_harness.cli.base import EXIT_CODES  # lazy: base reads run folders (numpy)

    return EXIT_CODES


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


class CommandParser(Parser):
    """A command's parser, filled in from its module the first time it parses or shows
    its help: the command's options, its docstring, the exit codes, its handler and the
    project's defaults for it."""

    def __init__(self, *, command: str | None = None,
                 project_defaults: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pending = command
        self.project_defaults = project_defaults or {}

    def load(self) -> None:
        if self.pending is None:
            return
        command, self.pending = load_command(self.pending), None
        self.description, self.epilog = doc_of(command), exit_codes()
        command.prepare_parser(self)
        self.set_defaults(handler=command.run, **self.project_defaults)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.load()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.load()
        return super().format_usage()

    def format_help(self) -> str:
        self.load()
        return super().format_help()


class TopParser(Parser):
    """``leak-harness`` itself. Its help lists every command with its summary (the first
    paragraph of the command's docstring): the help of the parser with all of them
    loaded."""

    def __init__(self, project_defaults: dict[str, dict[str, Any]] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.project_defaults = project_defaults

    def format_help(self) -> str:
        return build_parser(self.project_defaults, every_command=True).format_help()


def build_parser(defaults: dict[str, dict[str, Any]] | None = None,
                 every_command: bool = False) -> Parser:
    """The CLI; ``defaults``: per command, option defaults from the project's table.

    Each command is loaded when its parser is first used; ``every_command`` loads them
    all now, for the summaries the top-level help lists.
    """
    raw = argparse.RawDescriptionHelpFormatter
    parser = (Parser(prog="leak-harness", description=DESCRIPTION, epilog=exit_codes(),
                     formatter_class=raw) if every_command
              else TopParser(defaults, prog="leak-harness", description=DESCRIPTION,
                             formatter_class=raw))
    parser.add_argument("--version", action="version", version=f"%(prog)s {harness_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for name in COMMANDS:
        options: dict[str, Any] = {"command": name, "formatter_class": raw,
                                   "project_defaults": (defaults or {}).get(name, {})}
        if every_command:  # the summary the top-level help lists: the docstring's first paragraph
            options["help"] = doc_of(load_command(name)).split("\n\n")[0].replace("\n", " ")
        commands.add_parser(name, **options)
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
