"""Time to detect each regression, over seeds, and the wall time of the whole check.

Every injected cell of the detection matrix (each scenario with each of its
regressions) runs once per seed exactly as ``leak-harness check`` runs it
(``harness.parent.matrix.run_cell``: the scenario's check duration and budgets, early
stop once the verdict is certain). Time to detect is ``summary.json``'s
``time_to_detect_s`` (seconds of workload since start), or for a crash the
seconds of workload until it; the cell's wall time includes the worker's
start-up, the stop and the analysis. Then ``make leak-check``'s command runs
once, timed.

Targets: every regression detected in under 10 s of workload (worst seed), and
the whole check under 5 minutes on this machine. ``--generic`` turns off every
budget of a scenario that is not one of the generic ones any process has
(``GENERIC_BUDGETS``: RSS, heap, blocks, shared memory, threads, descriptors,
cyclic garbage, pinned tensors), so the cache's own gauges and idle books
catch nothing: what a user's cache without them would see.

    python bench/time_to_detect.py [--seeds 5] [--no-check] [--generic]
    python bench/time_to_detect.py --no-check -k unified-hicache-exits   # its own record
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import ROOT, Record
from harness.budgets import parse_budget
from harness.parent.matrix import CheckOptions, plan, run_cell
from harness.registry import load_scenario, scenario_names
from scenarios.workloads.common import GENERIC_BUDGETS

TARGET_DETECT_S = 10.0
TARGET_CHECK_S = 300.0
LEAK_HARNESS = Path(sys.executable).parent / "leak-harness"


def generic_only(cell: Any) -> tuple[str, ...]:
    """Overrides that turn off the cell's budgets on anything but the generic signals."""
    generic = {parse_budget(text).metric for text in GENERIC_BUDGETS}
    return tuple(f"{metric}: off" for metric in
                 dict.fromkeys(parse_budget(text).metric for text in cell.scenario.budgets)
                 if metric not in generic)


def detect_once(label: str, cell: Any, seed: int, out: Path,
                budgets: tuple[str, ...] = ()) -> dict[str, Any]:
    began = time.monotonic()
    result = run_cell(cell, CheckOptions(out=out / f"seed-{seed}", seed=seed, budgets=budgets))
    wall = time.monotonic() - began
    summary = result.outcome.summary
    detect = summary.time_to_detect_s
    if detect is None and result.outcome.verdict in ("crashed", "hung", "ceiling"):
        detect = summary.duration_s  # the process verdict is the detection
    print(f"  {label} seed {seed}: {result.outcome.verdict}, detected at "
          f"{'-' if detect is None else f'{detect:.1f} s'}, wall {wall:.1f} s", flush=True)
    return {"seed": seed, "verdict": result.outcome.verdict, "correct": result.judged().correct,
            "detect_s": detect, "wall_s": wall}


def whole_check(out: Path) -> tuple[float, int]:
    """Wall seconds and exit code of ``make leak-check``'s command."""
    command = [str(LEAK_HARNESS), "check", "-j", "2", "--out", str(out / "check"),
               "--history", str(out / "history.sqlite")]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    return time.monotonic() - began, done.returncode


def row(label: str, runs: list[dict[str, Any]]) -> list[str]:
    found = [r["detect_s"] for r in runs if r["correct"] and r["detect_s"] is not None]
    walls = [r["wall_s"] for r in runs]
    verdicts = sorted({r["verdict"] for r in runs})
    missed = len(runs) - len(found)
    return [label, "/".join(verdicts), f"{len(found)}/{len(runs)}",
            f"{statistics.median(found):.1f}" if found else "-",
            f"{max(found):.1f}" if found and not missed else "never" if not found else
            f"{max(found):.1f} (+{missed} missed)",
            f"{statistics.median(walls):.1f}", f"{max(walls):.1f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--no-check", action="store_true", help="skip timing the whole check")
    parser.add_argument("-k", dest="select", default=None, help="cells to time (check's -k)")
    parser.add_argument("--generic", action="store_true",
                        help="judge on the generic budgets only (no cache gauges)")
    args = parser.parse_args(argv)
    cells = [c for c in plan([load_scenario(n) for n in scenario_names()], args.select)
             if c.inject is not None]
    key, title = (("time_to_detect_generic", "Time to detect: generic budgets only")
                  if args.generic else ("time_to_detect", "Time to detect"))
    if args.select:  # a subset keeps its own record: the full run's stays whole
        key, title = f"{key}-{args.select}", f"{title}: {args.select}"
    rec = Record(key, title, {"seeds": args.seeds, "regressions": len(cells),
                              "select": args.select or "all", "generic": args.generic})
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-detect-") as tmp:
        for seed in range(args.seeds):  # seeds outermost: load drift spreads over every cell
            for cell in cells:
                off = generic_only(cell) if args.generic else ()
                results.setdefault(cell.label, []).append(
                    detect_once(cell.label, cell, seed, Path(tmp), off))
        check = None if args.no_check else whole_check(Path(tmp))
    rec.figures["cells"] = results
    rec.say(f"Each injected cell as `leak-harness check` runs it, seeds 0..{args.seeds - 1}; "
            "detected = seconds of workload (crash: until the crash); wall = the whole cell."
            + (f" Budgets: only {', '.join(GENERIC_BUDGETS)}; the rest off." if args.generic
               else ""))
    rec.table(["regression cell", "verdicts", "detected", "median s", "worst s", "wall median s",
               "wall worst s"], [row(label, runs) for label, runs in results.items()])
    report_targets(rec, results, check)
    rec.publish()
    return 0


def report_targets(rec: Record, results: dict[str, list[dict[str, Any]]],
                   check: tuple[float, int] | None) -> None:
    worst_s, worst_label, missed = 0.0, "", 0
    for label, runs in results.items():
        for r in runs:
            if not r["correct"] or r["detect_s"] is None:
                missed += 1
            elif r["detect_s"] > worst_s:
                worst_s, worst_label = r["detect_s"], label
    met = missed == 0 and worst_s < TARGET_DETECT_S
    why = (f"{missed} runs not detected" if missed else
           f"{worst_s - TARGET_DETECT_S:.1f} s over on {worst_label}")
    rec.target("every regression detected in under 10 s of workload", met,
               f"worst {worst_s:.1f} s ({worst_label}), {missed} undetected", why=why)
    if check is not None:
        wall, code = check
        rec.figures["check"] = {"wall_s": wall, "exit_code": code}
        rec.say(f"whole `make leak-check` command: {wall:.0f} s wall, exit code {code}"
                f"{' (some cell was wrong)' if code else ''}")
        rec.target("whole leak-check under 5 minutes", wall < TARGET_CHECK_S,
                   f"{wall:.0f} s", why=f"{wall - TARGET_CHECK_S:.0f} s over")


if __name__ == "__main__":
    raise SystemExit(main())
