"""Defaults from the project's ``pyproject.toml``, table ``[tool.leak-harness]``.

A team that runs the harness in CI keeps its target, budgets and folders in one
place, as pytest and ruff read theirs::

    [tool.leak-harness]
    target = "mypkg.cache:make"
    budgets = ["heap: 5 MB/h", "kv_lost: <= 0"]
    seed = 0
    jobs = 2                       # check
    duration = "30s"               # run and check
    out = "results/check"          # check's folder for run folders and the index
    history = "results/history.sqlite"   # check and report

The file is the one in the current folder. Each key becomes the default of the
commands that take that option; the command line wins (``--budget`` adds to the
table's budgets, and a later budget on the same metric replaces an earlier one).
A key the table does not know, a value of the wrong type, or one the command line
would refuse (a duration it cannot read, ``jobs = 0``, a budget it cannot parse, a
target not in ``module:callable`` form) is one sentence naming the file and the key,
and exit 2, before any command runs.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from harness.api import BUILTIN_TARGETS, is_target_spec
from harness.config import read_budget
from harness.configure import duration_from
from harness.errors import UsageError

PYPROJECT = "pyproject.toml"
TABLE = "leak-harness"
# key -> (argparse dest, the commands it applies to, the type it must have)
KEYS: dict[str, tuple[str, tuple[str, ...], type]] = {
    "target": ("target", ("run", "check", "doctor"), str),
    "budgets": ("budget", ("run", "check", "record"), list),
    "seed": ("seed", ("run", "check"), int),
    "jobs": ("jobs", ("check",), int),
    "duration": ("duration", ("run", "check"), str),
    "out": ("out", ("check",), str),
    "history": ("history", ("check", "report"), str),
}


def load_defaults(folder: Path) -> dict[str, dict[str, Any]]:
    """The table's values as argparse defaults, by command (empty without a table)."""
    table = read_table(folder / PYPROJECT)
    defaults: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UsageError(f"{PYPROJECT}: [tool.{TABLE}] has no key {key!r}.{hint} "
                             f"Known: {', '.join(KEYS)}.")
        dest, commands, kind = KEYS[key]
        if not of_kind(value, kind):
            shape = {list: "a list of strings", int: "an integer", str: "a string"}[kind]
            raise UsageError(f"{PYPROJECT}: [tool.{TABLE}] {key} must be {shape}, "
                             f"not {value!r}.")
        check_value(key, value, f"{PYPROJECT}: [tool.{TABLE}] {key}")
        for command in commands:
            defaults.setdefault(command, {})[dest] = list(value) if kind is list else value
    return defaults


def check_value(key: str, value: Any, where: str) -> None:
    """Refuse a value of the right type that the command line would refuse, naming
    ``where`` (the file and key), not a flag the user never typed."""
    if key == "duration":
        duration_from(where, value)
    elif key == "budgets":
        for text in value:
            read_budget(text, where)
    elif key == "jobs" and value < 1:
        raise UsageError(f"{where} must be at least 1, not {value}.")
    elif key == "target" and not is_target_spec(value):
        raise UsageError(f"{where} {value!r} is not 'module:callable' nor a built-in target "
                         f"({', '.join(BUILTIN_TARGETS)}).")


def of_kind(value: Any, kind: type) -> bool:
    """``value`` is of ``kind`` (a bool is no integer; a list holds strings only)."""
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    return not isinstance(value, list) or all(isinstance(v, str) for v in value)


def read_table(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it as TOML ({exc}).") from None
    table = data.get("tool", {}).get(TABLE, {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.{TABLE}] must be a table.")
    return table
