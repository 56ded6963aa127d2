"""The first "Where it grows" lines of every cell of a ``leak-harness check`` folder.

For each injected cell: its verdict, time to detect and the first three lines, and
whether the first names code or a holder (a file:line, a holder path, a cycle, a
table or a pool with its allocating site) rather than only a budget (a bare broken
level); for each fixed cell, how many lines name anything. Issue 42's targets: the
first line names code or a holder in 13 of 13 injected cells, every injected cell
detected within 10 s, the fixed cells name nothing.

    leak-harness check -j 2 --out /tmp/check --no-history
    python bench/where_first_lines.py /tmp/check [--before "cell=line" ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable without install

from bench.record import Record
from harness.runfiles.summary import load_summary

NAMES_CODE = ("books", "crash", "table", "locks", "cycles", "tensors", "gauge", "owner",
              "python", "native", "closing", "resources", "shared")
DETECT_S = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--before", action="append", default=[],
                        help="'scenario[cell]=first line' measured before, for the table")
    args = parser.parse_args(argv)
    before = dict(b.split("=", 1) for b in args.before)
    rec = Record("where_first_lines", "Where it grows: the first lines per cell",
                 {"folder": str(args.folder)})
    rows, named, detected, injected, fixed_named = [], 0, 0, 0, 0
    for path in sorted(args.folder.glob("*/*/summary.json")):
        summary = load_summary(path.parent)
        cell = f"{path.parent.parent.name}[{path.parent.name}]"
        where = list(summary.analysis.where or ()) if summary.analysis else []
        if path.parent.name == "fixed":
            fixed_named += sum(f.kind != "none" for f in where)
            continue
        injected += 1
        first = where[0] if where else None
        code = first is not None and first.kind in NAMES_CODE
        named += code
        ttd = summary.time_to_detect_s
        detected += ttd is not None and ttd <= DETECT_S
        rows.append([cell, summary.verdict, f"{ttd:.1f} s" if ttd is not None else "-",
                     before.get(cell, ""), first.text if first else "(none)",
                     "yes" if code else "NO"])
        rec.say(f"{cell}: {summary.verdict}, detected {rows[-1][2]}")
        for finding in where[:3]:
            rec.say(f"    - {finding.text}")
    rec.table(["cell", "verdict", "detected", "first line before", "first line now",
               "names code"], rows)
    rec.target("first line names code or a holder", named == injected,
               f"{named} of {injected} injected cells")
    rec.target(f"detected within {DETECT_S:.0f} s", detected == injected,
               f"{detected} of {injected} injected cells (one seed)")
    rec.target("fixed cells name nothing", fixed_named == 0, f"{fixed_named} lines")
    rec.publish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
