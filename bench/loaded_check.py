"""``make leak-check`` under the load a CI runner gives: does the gate cry wolf?

Each seed runs ``leak-harness check -j 2 --seed N`` (what ``make leak-check``
runs, with the seed changed) while one other CPU-bound process spins on the
same cores, as on a shared CI runner. A wrong cell is a fixed scenario that did
not pass or an injected regression that was not caught. One red build in three
on unchanged code (a healthy unified-pp-sync judged a leak on 3 MB of RSS in
18 s) is what this measures.

Target: 0 wrong cells over the seeds.

    python bench/loaded_check.py [--seeds 10] [--first 0]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import ROOT, Record

LEAK_HARNESS = Path(sys.executable).parent / "leak-harness"
# One core's worth of busy work, for as long as the check runs.
SPIN = "import time\nwhile True:\n    sum(range(10_000))\n"


def one_check(seed: int, out: Path) -> dict[str, Any]:
    """One loaded check: its wrong cells, wall time and exit code."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    began = time.monotonic()
    try:
        done = subprocess.run(
            [str(LEAK_HARNESS), "check", "-j", "2", "--seed", str(seed), "--json",
             "--no-history", "--out", str(out / f"seed-{seed}")],
            cwd=ROOT, capture_output=True, text=True, check=False)
    finally:
        spinner.kill()
        spinner.wait()
    wall = time.monotonic() - began
    try:
        suite = json.loads(done.stdout)
    except ValueError:
        return {"seed": seed, "wall_s": wall, "exit": done.returncode, "cells": 0,
                "wrong": [f"no suite: {done.stderr.strip()[-300:]}"]}
    wrong = [f"{c['scenario']}[{c['column']}]: {c['verdict']}" for c in suite["cells"]
             if not c["correct"]]
    return {"seed": seed, "wall_s": round(wall, 1), "exit": done.returncode,
            "cells": len(suite["cells"]), "wrong": wrong,
            "wrong_reasons": {f"{c['scenario']}[{c['column']}]": c["reasons"][:3]
                              for c in suite["cells"] if not c["correct"]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first", type=int, default=0, help="first seed (default 0)")
    args = parser.parse_args(argv)
    seeds = list(range(args.first, args.first + args.seeds))
    # A partial run keeps its own section: seeds 1-3 and 4-5 measured apart both stay.
    span = "" if seeds == list(range(10)) else f"seeds {seeds[0]}-{seeds[-1]}"
    rec = Record("loaded_check" + (f"-{span.replace(' ', '-')}" if span else ""),
                 "make leak-check under load" + (f": {span}" if span else ""),
                 {"seeds": " ".join(map(str, seeds)), "jobs": 2, "load": "one spinning process"})
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-loaded-check-") as tmp:
        for seed in seeds:
            row = one_check(seed, Path(tmp))
            print(f"  seed {seed}: {len(row['wrong'])} wrong of {row['cells']}, "
                  f"{row['wall_s']:.0f} s, exit {row['exit']} {row['wrong']}", flush=True)
            rows.append(row)
    rec.figures["checks"] = rows
    rec.say("Each seed: leak-harness check -j 2 --seed N beside one spinning process.")
    rec.table(["seed", "cells", "wrong", "wall", "exit", "wrong cells"],
              [[r["seed"], r["cells"], len(r["wrong"]), f"{r['wall_s']:.0f} s", r["exit"],
                "; ".join(r["wrong"]) or "-"] for r in rows])
    wrong = sum(len(r["wrong"]) for r in rows)
    rec.target("0 wrong cells in loaded runs of make leak-check", wrong == 0,
               f"{wrong} wrong cells in {len(rows)} loaded runs",
               why="; ".join(w for r in rows for w in r["wrong"]))
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
