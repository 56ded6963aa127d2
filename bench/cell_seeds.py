"""Chosen cells of the detection matrix over seeds, as ``make leak-check`` runs them.

For each seed, ``leak-harness check -j 2 -k SELECT --seed N`` (two cells at once, the
load ``make leak-check`` runs under): per cell, its verdict on each seed, when an
injected cell was detected, and the first line of its "Where it grows". Targets (issue
"Sessions, disaggregated prefill/decode, speculative decoding and the unified host
tier"): every injected cell detected within 10 s on every seed, with a first line that
names code, a pool or a holder (not a bare budget); every fixed cell passes on every
seed (``suspicious`` counts as not failing, as ``check`` counts it, and is shown).

    python bench/cell_seeds.py --select '*-sessions*,pd-*' --seeds 5 [--key new_paths]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable without install

from bench.record import ROOT, Record
from bench.where_first_lines import NAMES_CODE
from harness.runfiles.summary import load_summary

DETECT_S = 10.0


def check_once(select: str, seed: int, out: Path) -> tuple[list[dict[str, Any]], float]:
    """The cells of one ``check`` and its wall time."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "leak_harness", "check", "-j", "2", "-k", select,
         "--seed", str(seed), "--out", str(out), "--no-history", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    wall = time.monotonic() - began
    try:
        cells: list[dict[str, Any]] = json.loads(done.stdout)["cells"]
    except (ValueError, KeyError):
        print(done.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"check -k {select!r} --seed {seed} wrote no suite (exit "
                         f"{done.returncode})") from None
    for cell in cells:
        cell["first"], cell["names_code"] = first_line(Path(cell["rundir"]))
    return cells, wall


def first_line(rundir: Path) -> tuple[str, bool]:
    """The first "Where it grows" line of a cell, and whether it names code or a holder."""
    try:
        summary = load_summary(rundir)
    except (OSError, ValueError):
        return "(no summary)", False
    where = list(summary.analysis.where or ()) if summary.analysis else []
    if not where:
        return "(none)", False
    return where[0].text, where[0].kind in NAMES_CODE


def label(cell: dict[str, Any]) -> str:
    return f"{cell['scenario']}[{cell['column']}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--select", required=True, help="check's -k (comma-separated globs)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--key", default="cell_seeds", help="the section's key in "
                        "docs/benchmarks/ (one section per key)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    rec = Record(args.key, args.title or f"Cells over seeds: {args.select}",
                 {"select": args.select, "seeds": args.seeds, "jobs": 2})
    runs: dict[str, list[dict[str, Any]]] = {}
    walls = []
    with tempfile.TemporaryDirectory(prefix="bench-cells-") as tmp:
        for seed in range(args.seeds):
            cells, wall = check_once(args.select, seed, Path(tmp) / f"seed-{seed}")
            walls.append(wall)
            rec.say(f"seed {seed}: {len(cells)} cells in {wall:.0f} s")
            for cell in cells:
                runs.setdefault(label(cell), []).append(cell)
                detect = cell["detect_s"]
                rec.say(f"  {label(cell)}: {cell['verdict']}"
                        + (f", detected {detect:.1f} s" if detect is not None else "")
                        + (f"; {cell['first'][:160]}" if cell["column"] != "fixed" else ""))
    rec.figures["cells"] = runs
    rec.figures["walls_s"] = walls
    rec.table(["cell", "verdicts over seeds", "right", "detected (worst)", "first line names",
               "first line (seed 0)"], [row(name, cells) for name, cells in runs.items()])
    judge(rec, runs)
    rec.publish()
    return 0


def row(name: str, cells: list[dict[str, Any]]) -> list[str]:
    verdicts = "/".join(c["verdict"] for c in cells)
    right = sum(bool(c["correct"]) for c in cells)
    if name.endswith("[fixed]"):
        return [name, verdicts, f"{right}/{len(cells)}", "-", "-", "-"]
    found = [c["detect_s"] for c in cells if c["detect_s"] is not None]
    worst = f"{max(found):.1f} s" if len(found) == len(cells) else f"{len(found)} of {len(cells)}"
    named = sum(bool(c["names_code"]) for c in cells)
    return [name, verdicts, f"{right}/{len(cells)}", worst, f"code in {named}/{len(cells)}",
            cells[0]["first"][:200]]


def judge(rec: Record, runs: dict[str, list[dict[str, Any]]]) -> None:
    fixed = {n: c for n, c in runs.items() if n.endswith("[fixed]")}
    injected = {n: c for n, c in runs.items() if not n.endswith("[fixed]")}
    wrong_fixed = [n for n, cells in fixed.items() if not all(c["correct"] for c in cells)]
    rec.target("every fixed cell passes on every seed, two runs at once", not wrong_fixed,
               f"{len(fixed) - len(wrong_fixed)} of {len(fixed)} fixed cells right on every "
               "seed", f"wrong: {', '.join(wrong_fixed)}" if wrong_fixed else "")
    late = [n for n, cells in injected.items()
            if not all(c["correct"] and c["detect_s"] is not None and c["detect_s"] <= DETECT_S
                       for c in cells)]
    rec.target(f"every injected cell detected within {DETECT_S:g} s on every seed", not late,
               f"{len(injected) - len(late)} of {len(injected)} injected cells",
               f"late or missed: {', '.join(late)}" if late else "")
    vague = [n for n, cells in injected.items() if not all(c["names_code"] for c in cells)]
    rec.target("each injected cell's first 'Where it grows' line names code, a pool or a "
               "holder on every seed", not vague,
               f"{len(injected) - len(vague)} of {len(injected)} injected cells",
               f"not named: {', '.join(vague)}" if vague else "")


if __name__ == "__main__":
    raise SystemExit(main())
