"""The shell commands the README and docs/*.md show, as the docs test runs them.

Commands come from fenced code blocks marked ``sh``, ``bash``, ``shell`` or
``console`` (in a ``console`` block, only the lines that start with ``$ ``).
A line ending in ``\\`` continues on the next; blank lines and comment lines are
not commands; a trailing ``# comment`` is dropped from the command but read for
its expected exit code. Unmarked blocks are output or drawings (the
architecture, benchmark tables), never commands: :func:`unmarked_commands`
finds an unmarked block that looks like one, so that the docs test can fail on
it instead of passing over it.

Expected exit code, 0 unless the docs say otherwise, in the docs themselves:

- ``<!-- expect-exit: N -->`` on the lines just before a block: every command
  of the block;
- a trailing comment that says ``exits N`` (or ``exit N``): that command only,
  and it wins over the block's.

Skipped: a block after ``<!-- docs-test: skip (reason) -->``, and every command
one of :data:`SKIP_RULES` matches (each rule says why such a command cannot run
from a copy of this repository).

Rewritten, so that the whole set runs in about 6 minutes on 2 cores and keeps to
one core at a time (:func:`shorten`): a ``--duration`` over :data:`SHORT_DURATION`
becomes it (20 s: the shortest window the healthy growth is calibrated over, as
``check`` runs a fixed cell; at 10 s a fixed cache on examples.paged_engine was
judged ``leak`` on its heap, 29 MB/h over 8 s), and ``run`` and ``record`` get
it when they have none; ``-j``/``--jobs`` becomes 1; ``check`` without ``-k``
gets ``-k 'mamba-lru*'`` (one fixed cell and one injected, at the scenario's own
check duration, instead of all 33 cells: 12 minutes); ``make leak-check``
passes the same through the Makefile's ``CHECK_ARGS``, so the target's own
recipe runs. A pipeline or a list of commands is run as written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<info>[^`\s]*)")
EXPECT_MARKER = re.compile(r"<!--\s*expect-exit:\s*(?P<code>\d+)\s*-->")
SKIP_MARKER = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
# In a trailing comment: "exits 1", "exit 1", "(exits 1: the leak is caught)".
EXIT_IN_COMMENT = re.compile(r"\bexits?\s+(?P<code>\d+)\b")
# How many lines before a block a marker may stand (a blank line, the marker, a
# blank line): further up it belongs to something else.
MARKER_REACH = 3

SHORT_DURATION = "20s"
SHORT_SECONDS = 20.0
# One fixed cell and its injected regression: the matrix's both kinds of verdict.
CHECK_SELECTION = "mamba-lru*"
LEAK_HARNESS = re.compile(r"(?:^|/)leak-harness$")

# (pattern on the command, why a command like it cannot run here). Short on
# purpose: a command the docs show runs unless it really cannot.
SKIP_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^pip3?\s"),
     "pip acts on another environment (a serving virtualenv) and fetches from the network"),
    (re.compile(r"(?<![\w.])(?:mypkg|mypackage|myserver)\b"),
     "names the reader's own package, which this repository does not have"),
    (re.compile(r"^make\s+test(?:\s|$)"),
     "the whole suite, about 5 minutes on two workers: CI runs it (.ci/run)"),
)


@dataclass(frozen=True)
class Command:
    """One command as the docs show it, where, and what the docs promise."""

    path: str  # relative to the repository root
    line: int  # of the command's first line
    text: str  # continuations joined, trailing comment dropped
    expect: int
    skip: str | None  # the reason, when it does not run

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Block:
    path: str
    language: str
    first_line: int  # of the block's first content line
    lines: tuple[str, ...]
    before: tuple[str, ...]  # the lines just above the opening fence


def blocks(path: Path, root: Path) -> Iterator[Block]:
    """Every fenced code block of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening["fence"]
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        yield Block(
            path=path.relative_to(root).as_posix(),
            language=opening["info"].lower(),
            first_line=index + 2,
            lines=tuple(lines[index + 1 : end]),
            before=tuple(lines[max(0, index - MARKER_REACH) : index]),
        )
        index = end + 1


def split_comment(line: str) -> tuple[str, str]:
    """(command, trailing comment) of a shell line: '#' after a blank, outside quotes."""
    quote = ""
    for position, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (position == 0 or line[position - 1].isspace()):
            return line[:position].rstrip(), line[position + 1 :].strip()
    return line.rstrip(), ""


def logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """(line number, text) of each command line, continuations joined."""
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(block.lines):
        line = raw.strip()
        if block.language == "console" and not pending:
            if not line.startswith("$ "):
                continue  # the command's output
            line = line[2:]
        if not pending:
            start = block.first_line + offset
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        yield start, " ".join([*pending, line]).strip()
        pending = []
    if pending:
        yield start, " ".join(pending)


def marker_expect(block: Block) -> int:
    found = [EXPECT_MARKER.search(line) for line in block.before]
    codes = [int(match["code"]) for match in found if match]
    return codes[-1] if codes else 0


def marker_skip(block: Block) -> str | None:
    found = [SKIP_MARKER.search(line) for line in block.before]
    reasons = [match["reason"].strip() for match in found if match]
    return reasons[-1] if reasons else None


def rule_skip(text: str) -> str | None:
    for pattern, reason in SKIP_RULES:
        if pattern.search(text):
            return reason
    return None


def block_commands(block: Block) -> Iterator[Command]:
    block_skip = marker_skip(block)
    block_expect = marker_expect(block)
    for line, logical in logical_lines(block):
        text, comment = split_comment(logical)
        if not text:
            continue  # a comment line
        said = EXIT_IN_COMMENT.search(comment)
        yield Command(
            path=block.path,
            line=line,
            text=text,
            expect=int(said["code"]) if said else block_expect,
            skip=block_skip or rule_skip(text),
        )


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def documented_commands(root: Path) -> list[Command]:
    """Every command of every shell block of the README and docs/*.md, in order."""
    return [
        command
        for path in doc_files(root)
        for block in blocks(path, root)
        if block.language in SHELL_LANGUAGES
        for command in block_commands(block)
    ]


# The start of a line that an unmarked block would only hold as a command; not the
# architecture drawing's "leak-harness run / check / pytest".
COMMAND_START = re.compile(
    r"^\s*(?:\$ |\.venv/bin/|leak-harness [a-z]+(?:$|\s+(?!/))|make |python3? |pytest |pip )"
)


def unmarked_commands(root: Path) -> list[str]:
    """'path:line: text' of each line of an unmarked block that reads as a command."""
    found: list[str] = []
    for path in doc_files(root):
        for block in blocks(path, root):
            if block.language:
                continue
            found.extend(
                f"{block.path}:{block.first_line + offset}: {line.strip()}"
                for offset, line in enumerate(block.lines)
                if COMMAND_START.match(line)
            )
    return found


def seconds(duration: str) -> float | None:
    """Seconds of a duration like 30s, 10m, 2h or 45; None when it is not one."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h)?", duration)
    if match is None:
        return None
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[match[2]]
    return float(match[1]) * scale


def harness_subcommand(words: list[str]) -> str | None:
    """The subcommand when the words call leak-harness (before any '--')."""
    for index, word in enumerate(words[:-1]):
        if word == "--":
            return None  # a recorded program's own arguments
        if LEAK_HARNESS.search(word):
            return words[index + 1]
    return None


def split_equals(words: list[str]) -> list[str]:
    """``--duration=30s`` as ``--duration 30s``, so one rule reads both."""
    out: list[str] = []
    for word in words:
        flag, equals, value = word.partition("=")
        out += [flag, value] if equals and flag in ("--duration", "--jobs") else [word]
    return out


def shorten_harness(words: list[str]) -> list[str]:
    """The leak-harness words with a short duration, one job and a small matrix."""
    subcommand = harness_subcommand(words)
    if subcommand is None:
        return words
    # The harness's own options end at '--' (record's program follows it).
    own_end = words.index("--") if "--" in words else len(words)
    own, program = split_equals(words[:own_end]), words[own_end:]
    out: list[str] = []
    iterator = iter(enumerate(own))
    for index, word in iterator:
        if word in ("-j", "--jobs", "--duration") and index + 1 < len(own):
            value = next(iterator)[1]
            if word == "--duration":
                wanted = seconds(value)
                short = wanted is not None and wanted <= SHORT_SECONDS
                out += [word, value if short else SHORT_DURATION]
            else:
                out += [word, "1"]
            continue
        out.append(word)
    if subcommand in ("run", "record") and "--duration" not in own:
        out += ["--duration", SHORT_DURATION]
    if subcommand == "check" and "-k" not in own:
        out += ["-k", CHECK_SELECTION]
    return out + program


# Shell operators: shlex.join would quote them into words.
OPERATORS = frozenset({"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1"})


def shorten(text: str) -> str:
    """The command the test runs for ``text``: the same, bounded in time and CPU."""
    words = shlex.split(text)
    if OPERATORS.intersection(words):
        # Not rewritten word by word: a pipeline's parts would need it one by one.
        return text
    if words[:2] == ["make", "leak-check"]:
        # Its recipe passes CHECK_ARGS last: a later -j wins in argparse.
        extra = f"-j 1 -k {shlex.quote(CHECK_SELECTION)}"
        return shlex.join([*words, f"CHECK_ARGS={extra}"])
    shortened = shorten_harness(words)
    return text if shortened == words else shlex.join(shortened)
