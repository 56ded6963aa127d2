"""Numbers in README.md and docs/incidents.md, rewritten from the benchmark records.

A measured number in those pages sits between two HTML comments, invisible once
rendered and safe inside a table cell (no ``|``, no newline)::

    over <!-- n:time_to_detect/params/seeds d -->5<!-- /n --> seeds
    <!-- n:time_to_detect/figures/cells/radix-dllm[*/*/detect_s median .1f -->1.9<!-- /n --> s

The marker reads ``n:PATH [REDUCE] FORMAT``:

- ``PATH``: the record's file name in ``docs/benchmarks/`` (without ``.json``), then
  the keys and list indices into its JSON, ``/``-separated. A ``*`` in a step matches
  any run of characters of a key (or any index of a list), so one path may reach
  several values: ``time_to_detect/figures/cells/*-lru[*/*/detect_s``.
- ``REDUCE``: one of :data:`REDUCERS`, needed when the path reaches more than one
  value. Missing values (``null``: a seed never detected) are left out, as the
  benchmark's own table leaves them out.
- ``FORMAT``: a Python format spec for the value: ``.1f``, ``d``, ``.10`` (the
  first 10 characters of a string, e.g. the date of a record).

``python bench/docs_numbers.py`` rewrites every marked span; ``--check`` only says
which differ (exit 1), as ``tests/bench/test_docs_numbers.py`` does.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "benchmarks"
PAGES = (ROOT / "README.md", ROOT / "docs" / "incidents.md")

# The span's text may not cross a line: an edit to a number stays a one-line diff.
MARKED = re.compile(r"<!-- n:(?P<spec>[^>|\n]+?) -->(?P<text>[^\n]*?)<!-- /n -->")

REDUCERS: dict[str, Callable[[list[Any]], Any]] = {
    "median": statistics.median,
    "mean": statistics.fmean,
    "max": max,
    "min": min,
    "sum": sum,
    "count": len,
}


class MarkerError(ValueError):
    """A marker that cannot be resolved: a bad spec or a path into nothing."""


class Records:
    """The JSON records of a folder, each read once."""

    def __init__(self, folder: Path = RECORDS) -> None:
        self.folder = folder
        self._loaded: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self._loaded:
            path = self.folder / f"{name}.json"
            if not path.is_file():
                raise MarkerError(f"no record {path.name} in {self.folder}")
            self._loaded[name] = json.loads(path.read_text())
        return self._loaded[name]


def step_matches(step: str, key: str) -> bool:
    """Whether one path step names ``key``: literally, or through its ``*`` wildcards."""
    if "*" not in step:
        return step == key
    pattern = ".*".join(re.escape(part) for part in step.split("*"))
    return re.fullmatch(pattern, key) is not None


def children(node: Any, step: str) -> Iterator[Any]:
    """The values under ``node`` that one path step reaches (dict keys in file order)."""
    if isinstance(node, dict):
        yield from (value for key, value in node.items() if step_matches(step, key))
    elif isinstance(node, list):
        yield from (value for i, value in enumerate(node) if step_matches(step, str(i)))


def resolve(path: str, records: Records) -> list[Any]:
    """Every value ``path`` reaches; a path that reaches nothing is an error, never empty."""
    name, *steps = path.split("/")
    nodes = [records.get(name)]
    for depth, step in enumerate(steps, start=1):
        nodes = [child for node in nodes for child in children(node, step)]
        if not nodes:
            raise MarkerError(f"{path}: nothing at {'/'.join([name, *steps[:depth]])}")
    return nodes


def value_of(spec: str, records: Records) -> str:
    """The text a marker's spec stands for, from the records as they are now."""
    words = spec.split()
    if len(words) not in (2, 3):
        raise MarkerError(f"marker {spec!r}: want 'PATH [REDUCE] FORMAT'")
    path, fmt = words[0], words[-1]
    values = resolve(path, records)
    if len(words) == 3:
        reduce = REDUCERS.get(words[1])
        if reduce is None:
            raise MarkerError(f"marker {spec!r}: reduce with one of {', '.join(REDUCERS)}")
        present = [v for v in values if v is not None]
        if not present:
            raise MarkerError(f"marker {spec!r}: every value is missing")
        return format(reduce(present), fmt)
    if len(values) != 1:
        raise MarkerError(f"marker {spec!r}: {len(values)} values; name a reducer")
    return format(values[0], fmt)


def spans(text: str) -> list[re.Match[str]]:
    """The marked spans; an opening marker without its close is an error, not skipped."""
    found = list(MARKED.finditer(text))
    closed = {m.start() for m in found}
    for opening in re.finditer("<!-- n:", text):
        if opening.start() not in closed:
            line = text.count("\n", 0, opening.start()) + 1
            raise MarkerError(f"line {line}: a marker without '<!-- /n -->' on its line")
    return found


def rewrite(text: str, records: Records) -> str:
    """``text`` with every marked span holding what its record says."""
    spans(text)  # refuse a page with a broken marker before changing any of it
    def fill(m: re.Match[str]) -> str:
        return f"<!-- n:{m['spec']} -->{value_of(m['spec'], records)}<!-- /n -->"
    return MARKED.sub(fill, text)


def stale(text: str, records: Records) -> list[tuple[str, str, str]]:
    """(spec, written, expected) for each marked span that differs from its record."""
    found = ((m["spec"], m["text"], value_of(m["spec"], records)) for m in spans(text))
    return [(spec, written, expected) for spec, written, expected in found if written != expected]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; list the numbers that differ from their records")
    args = parser.parse_args(argv)
    records, differing = Records(), 0
    for page in PAGES:
        text = page.read_text()
        for spec, written, expected in stale(text, records):
            differing += 1
            print(f"{page.relative_to(ROOT)}: {spec}: {written!r}, the record says {expected!r}")
        new = text if args.check else rewrite(text, records)
        if new != text:
            page.write_text(new)
    print(f"{differing} numbers {'differ' if args.check else 'rewritten'} "
          f"in {', '.join(str(p.relative_to(ROOT)) for p in PAGES)}")
    return 1 if args.check and differing else 0


if __name__ == "__main__":
    sys.exit(main())
