"""Commands work as written: every shell command of the README and docs/*.md is run.

``make docs-check`` runs the tests marked ``docs``: each command the docs show
(``tests/docs/commands.py`` says which, what exit code the docs promise and how
a long one is shortened) runs with ``bash -c`` from the root of a clean copy of
this checkout (the files git sees), with the copy's own .venv first on PATH and
no PYTHONPATH (``tests/docs/clean_copy.py`` says how the copy's .venv imports
the copy's code and nothing else), so a command that only works thanks to
pytest's ``pythonpath = ["."]`` fails here. One run per distinct command: the
README and docs/record.md show the same ``record`` line.

The unmarked tests check the parsing and the rules, and run in ``make test``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.docs.clean_copy import Outcome, command_env, copy_files, make_venv, run_bounded
from tests.docs.commands import (
    CHECK_SELECTION,
    SHORT_DURATION,
    SKIP_RULES,
    Command,
    documented_commands,
    shorten,
    unmarked_commands,
)

ROOT = Path(__file__).resolve().parents[2]
# A shortened check of two cells takes about a minute on a loaded 2-core machine.
TIMEOUT_S = 180.0
SHOWN_LINES = 60


def distinct(commands: list[Command]) -> list[list[Command]]:
    """Commands grouped by what would run and what it must give, in doc order."""
    groups: dict[tuple[str, int, str | None], list[Command]] = {}
    for command in commands:
        groups.setdefault((shorten(command.text), command.expect, command.skip), []).append(command)
    return list(groups.values())


def as_param(group: list[Command]) -> object:
    first = group[0]
    marks = [pytest.mark.skip(reason=first.skip)] if first.skip else []
    return pytest.param(group, id=f"{first.where} {first.text[:60]}", marks=marks)


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("clean-copy")
    assert copy_files(ROOT, copy) > 0
    make_venv(copy)
    return copy


def run_in(copy: Path, command: str) -> Outcome:
    return run_bounded(command, copy, command_env(copy / ".venv"), TIMEOUT_S)


def tail(output: str) -> str:
    return "\n".join(output.splitlines()[-SHOWN_LINES:])


@pytest.mark.docs
@pytest.mark.integration
def test_the_copy_imports_its_own_code_and_not_its_folder(clean_copy: Path) -> None:
    """The copy's python finds the copy's harness, and a script's finds no examples.

    ``-P`` keeps the current folder off sys.path, as a console script's start
    does: the case the README's own-cache doctor command failed in.
    """
    found = run_in(clean_copy, 'python -P -c "import harness; print(harness.__file__)"')
    assert found.code == 0, found.output
    assert Path(found.output.strip()) == clean_copy / "harness" / "__init__.py"
    hidden = run_in(clean_copy, 'python -P -c "import examples"')
    assert hidden.code == 1 and "No module named 'examples'" in hidden.output
    version = run_in(clean_copy, "leak-harness --version")
    assert version.code == 0 and version.output.startswith("leak-harness "), version.output


@pytest.mark.docs
@pytest.mark.integration
@pytest.mark.parametrize("group", [as_param(g) for g in distinct(documented_commands(ROOT))])
def test_command_exits_as_documented(group: list[Command], clean_copy: Path) -> None:
    command = shorten(group[0].text)
    outcome = run_in(clean_copy, command)
    where = ", ".join(c.where for c in group)
    assert outcome.code == group[0].expect, (
        f"{where}: {group[0].text}\nran: {command}\n"
        f"exit {outcome.code} (None: killed after {TIMEOUT_S:.0f} s), "
        f"the docs promise {group[0].expect}\n{tail(outcome.output)}"
    )
    for shown_in, check in OUTPUT_CHECKS.items():
        problem = check(outcome.output) if shown_in in command else None
        assert problem is None, f"{where}: {group[0].text}\n{problem}\n{tail(outcome.output)}"


def first_where_names_seen(output: str) -> str | None:
    """What is wrong with the record example's output: its leaking worker (the spawned
    child) must lead "Where it grows" with the dict that keeps the request bodies and
    the line that allocates them, as the README and docs/record.md say; None if right."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith("process ") and "spawn_main" in line), None)
    if start is None:
        return "no section for the spawned worker"
    where = next((i for i in range(start, len(lines)) if lines[i].strip() == "where it grows:"),
                 None)
    first = lines[where + 1] if where is not None and where + 1 < len(lines) else ""
    if "SEEN" in first and "examples/leaky_service.py:" in first:
        return None
    return f"the worker's first 'Where it grows' line names no SEEN and its line: {first!r}"


# What a command's output must show besides its exit code, by a part of the command.
OUTPUT_CHECKS = {"examples/leaky_service.py --leak": first_where_names_seen}


def test_the_record_examples_check_reads_the_workers_first_line() -> None:
    section = ["process 7 (a child: python -c from multiprocessing.spawn import spawn_main): "
               "leak", "  - rss growth ...", "  where it grows:"]
    right = "    - ... at examples/leaky_service.py:45: ...; held by SEEN, a dict of 90 entries"
    assert first_where_names_seen("\n".join(["process 6 (the program): pass", "  where it "
                                             "grows:", "    - nothing", *section, right])) is None
    wrong = "    - reference cycles: _MainProcess.<ref> -> tuple[] -> (back) (2 seen)"
    assert "names no SEEN" in str(first_where_names_seen("\n".join([*section, wrong, right])))
    assert first_where_names_seen("overall: leak") == "no section for the spawned worker"


def test_the_docs_show_commands_and_no_unmarked_ones() -> None:
    commands = documented_commands(ROOT)
    assert sum(c.skip is None for c in commands) >= 5, [c.where for c in commands]
    # A command in an unmarked block would never run here: mark the block ```sh.
    assert unmarked_commands(ROOT) == []


def test_every_skip_rule_is_in_use() -> None:
    """A rule no documented command needs any more goes, so the list stays short."""
    texts = [c.text for c in documented_commands(ROOT)]
    unused = [reason for pattern, reason in SKIP_RULES if not any(map(pattern.search, texts))]
    assert unused == []


def test_every_documented_harness_command_runs() -> None:
    """No leak-harness, python or make leak-check command is skipped but a placeholder one."""
    for command in documented_commands(ROOT):
        words = shlex.split(command.text)
        ours = words[0].endswith("leak-harness") or words[:2] == ["make", "leak-check"]
        if ours and command.skip is not None:
            assert "reader's own package" in command.skip, command.where


SAMPLE = """\
# Title

```sh
make leak-check            # the matrix
.venv/bin/leak-harness run mamba-lru --inject mamba-lru-unlink \\
    --duration 30s         # exits 1: the leak is caught
# a comment line
```

<!-- expect-exit: 2 -->
```bash
leak-harness run no-such-scenario
```

<!-- docs-test: skip (needs a GPU) -->
```console
$ leak-harness run radix-steady --gc-mode server
verdict: pass
$ echo '# not a comment'
```

```
make not-a-command-here
```

```python
import os
```
"""


def sample_commands(tmp_path: Path) -> list[Command]:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(SAMPLE, encoding="utf-8")
    return documented_commands(tmp_path)


def test_commands_are_read_with_their_lines_codes_and_skips(tmp_path: Path) -> None:
    found = [(c.line, c.text, c.expect, c.skip) for c in sample_commands(tmp_path)]
    assert found == [
        (4, "make leak-check", 0, None),
        (5, ".venv/bin/leak-harness run mamba-lru --inject mamba-lru-unlink --duration 30s",
         1, None),
        (12, "leak-harness run no-such-scenario", 2, None),
        (17, "leak-harness run radix-steady --gc-mode server", 0, "needs a GPU"),
        (19, "echo '# not a comment'", 0, "needs a GPU"),
    ]
    assert unmarked_commands(tmp_path) == ["README.md:23: make not-a-command-here"]


def test_skip_rules_name_their_reason() -> None:
    texts = {
        "pip install --no-deps -e /path/to/leak-harness": "network",
        "leak-harness doctor --target mypkg.cache:make": "reader's own package",
        "make test": "whole suite",
    }
    for text, reason in texts.items():
        skipped = [r for pattern, r in SKIP_RULES if pattern.search(text)]
        assert skipped and reason in skipped[0], text
    assert not any(p.search("make test-quick") for p, _ in SKIP_RULES)


def test_long_commands_are_shortened_and_light() -> None:
    short = SHORT_DURATION
    cases = {
        ".venv/bin/leak-harness run mamba-lru --duration 30s":
            f".venv/bin/leak-harness run mamba-lru --duration {short}",
        ".venv/bin/leak-harness run radix-steady":
            f".venv/bin/leak-harness run radix-steady --duration {short}",
        "leak-harness run radix-steady --duration 15s":
            "leak-harness run radix-steady --duration 15s",
        "leak-harness check --target a.b:make -j 2":
            f"leak-harness check --target a.b:make -j 1 -k '{CHECK_SELECTION}'",
        "leak-harness check -k 'radix*'": "leak-harness check -k 'radix*'",
        "leak-harness record --follow-children -- python app.py --duration 1h":
            f"leak-harness record --follow-children --duration {short} -- python app.py"
            " --duration 1h",
        "leak-harness list": "leak-harness list",
        "leak-harness run x --duration=1h --jobs=3": f"leak-harness run x --duration {short}"
            " --jobs 1",
        "python examples/leaky_service.py --requests 20": "python examples/leaky_service.py"
            " --requests 20",
    }
    for text, expected in cases.items():
        assert shorten(text) == expected, text
    make = shlex.split(shorten("make leak-check"))
    assert make == ["make", "leak-check", f"CHECK_ARGS=-j 1 -k '{CHECK_SELECTION}'"]
