"""Holding recorded ``samples.jsonl`` lines to the TypedDicts of ``harness.runfiles.records``."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

from harness.runfiles.records import LINE_TYPES


def line_problems(record: dict[str, Any]) -> list[str]:
    """What is wrong with one line's keys (nested objects included); empty when nothing."""
    kind = LINE_TYPES.get(str(record.get("type")))
    if kind is None:
        return [f"unknown line type {record.get('type')!r}"]
    name = record["name"] if record["type"] == "event" else record["type"]
    return problems(record, kind, str(name))


def problems(value: Any, hint: Any, where: str) -> list[str]:
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        required, optional = hint.__required_keys__, hint.__optional_keys__
        found = [f"{where}: no {key!r}" for key in sorted(required - value.keys())]
        found += [f"{where}: unknown {key!r}" for key in sorted(value.keys() - required - optional)]
        fields = get_type_hints(hint)
        for key in sorted(value.keys() & fields.keys()):
            found += problems(value[key], fields[key], f"{where}.{key}")
        return found
    origin = get_origin(hint)
    if origin is list and isinstance(value, list):
        (item,) = get_args(hint)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]")]
    if origin in (Union, types.UnionType) and value is not None:
        options = [a for a in get_args(hint) if a is not type(None)]
        return problems(value, options[0], where) if len(options) == 1 else []
    return []  # scalars and plain dicts: the keys are what is held here


def file_problems(path: Path) -> list[str]:
    """Every problem of every line of a samples file, with its line number."""
    with path.open(encoding="utf-8") as lines:
        return [
            f"line {number}: {problem}"
            for number, text in enumerate(lines, start=1) if text.strip()
            for problem in line_problems(json.loads(text))
        ]
