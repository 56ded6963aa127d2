"""What recording costs a program: its own ops/s recorded and not, in one run.

The program (``bench/record_target.py``, a steady CPU-bound loop) runs for
``--duration`` seconds and prints the ops it did per CPU second of its own, and
per wall second, over the part after its ``--skip`` seconds. It runs ``--pairs``
times unrecorded and recorded, interleaved A B B A so drift cancels, in three
modes: unrecorded; recorded with ``--no-attribution`` (the samplers' polling
thread alone, what a recording costs between its windows); recorded with
everything on (the tracemalloc, native and final windows included). The cost
is ``1 - recorded/unrecorded`` of each pair's CPU rate: median, min and max.

Target: recording (sampling, between the windows) costs at most 3% of ops/s.

    python bench/record_overhead.py [--pairs 4] [--duration 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import Record, importable_here

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.03
TARGET_PROGRAM = "bench/record_target.py"


def one_run(mode: str, duration: float, skip: float, out: Path) -> dict[str, float]:
    program = [sys.executable, TARGET_PROGRAM, "--duration", str(duration), "--skip", str(skip)]
    if mode == "plain":
        done = subprocess.run(program, capture_output=True, text=True, check=True, cwd=ROOT)
        text = done.stdout
    else:
        flags = ["--no-attribution"] if mode == "sampling" else []
        subprocess.run([sys.executable, "-m", "leak_harness", "record", "--out", str(out), *flags,
                        "--", *program], capture_output=True, text=True, cwd=ROOT, check=False)
        text = (out / "program.log").read_text()
    return dict(json.loads(text.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--skip", type=float, default=4.0, help="start-up seconds not counted")
    args = parser.parse_args(argv)
    importable_here()
    rec = Record("record-overhead", "Record overhead", vars(args))
    rec.say(f"{TARGET_PROGRAM}: a steady CPU-bound loop, {args.duration:g} s per run, ops "
            f"counted after {args.skip:g} s; {args.pairs} interleaved pairs per mode")
    costs: dict[str, list[float]] = {"sampling": [], "everything": []}
    rates: dict[str, list[float]] = {"plain": [], "sampling": [], "everything": []}
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            for mode in ("sampling", "everything"):
                order = ("plain", mode) if pair % 2 == 0 else (mode, "plain")
                got = {m: one_run(m, args.duration, args.skip, Path(tmp) / f"{mode}-{pair}-{m}")
                       for m in order}
                for m in order:
                    rates[m].append(got[m]["ops_per_cpu_s"])
                cost = 1 - got[mode]["ops_per_cpu_s"] / got["plain"]["ops_per_cpu_s"]
                costs[mode].append(cost)
                rec.say(f"  pair {pair} {mode}: plain {got['plain']['ops_per_cpu_s']:,.0f} ops/"
                        f"CPU s, recorded {got[mode]['ops_per_cpu_s']:,.0f}: cost {cost:+.1%}")
    rows = [[mode, f"{statistics.median(rates['plain']):,.0f}",
             f"{statistics.median(rates[mode]):,.0f}", f"{statistics.median(c):+.1%}",
             f"{min(c):+.1%}", f"{max(c):+.1%}"] for mode, c in costs.items()]
    rec.table(["recorded with", "plain ops/CPU s", "recorded ops/CPU s", "median cost", "min",
               "max"], rows)
    sampling = statistics.median(costs["sampling"])
    rec.target("recording costs <= 3% of ops/s (sampling, between the windows)",
               sampling <= TARGET, f"median {sampling:+.1%}",
               "the polling thread takes the GIL from the program ten times a second")
    rec.figures = {"costs": costs, "rates": rates}
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
