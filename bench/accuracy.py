"""Accuracy of growth per hour, and false alarms on fixed code under CPU load.

1. Accuracy: each synthetic workload of ``bench/leaky_scenarios.py`` leaks a
   known number of bytes per operation (20 MB/h to 2 GB/h of wall time) and
   runs ``--duration`` seconds in a real worker with the default samplers. The
   estimate is the RSS growth the verdict was judged on (``summary.json``);
   the truth is the ``leaked_bytes`` gauge's rise over the same analysis
   window. Target: within 15%.
2. False alarms: every fixed scenario over ``--seeds`` seeds, each cell run as
   ``leak-harness check`` runs it (its check duration and budgets), while a
   busy-loop subprocess takes a core. Target: zero ``leak`` verdicts.

    python bench/accuracy.py [--rates LEAK_20MB,LEAK_2GB] [--duration 120] [--seeds 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.leaky_scenarios import RATES
from bench.record import Record, importable_here, metrics_json
from harness.config import RunConfig, read_budgets
from harness.parent.matrix import Cell, CheckOptions, run_cell
from harness.parent.runner import run
from harness.registry import load_scenario, scenario_names
from harness.runfiles.names import SAMPLES_FILE
from harness.runfiles.reader import load_samples

TARGET_ERROR = 0.15
BUDGET_B_PER_H = 50e6  # the leaky scenarios' budget: 'rss: 50 MB/h'
SPEC = "bench.leaky_scenarios:{}"
BUSY_LOOP = "while True: pass"


def judged_growth(metrics: dict[str, Any]) -> tuple[str, float]:
    """The RSS growth metric the rss budget was judged on (``rss_growth`` if none was)."""
    for name, metric in metrics.items():
        if name.startswith("rss_") and metric.get("budget", "").startswith("rss:"):
            return name, float(metric["value"])
    return "rss_growth", float(metrics["rss_growth"]["value"])


def true_growth(rundir: Path, window: tuple[float, float]) -> float:
    """Bytes per hour the workload really kept over the analysis window."""
    gauge = load_samples(rundir / SAMPLES_FILE).gauges["leaked_bytes"]
    start, end = np.interp(window, gauge.t, gauge.v)
    return float((end - start) / (window[1] - window[0]) * 3600.0)


def accuracy(attr: str, duration: float, tmp: Path) -> dict[str, Any]:
    scenario = load_scenario(SPEC.format(attr))
    config = RunConfig(scenario=SPEC.format(attr), rundir=str(tmp / attr), duration_s=duration,
                       warmup_s=5.0,
                       budgets=read_budgets(scenario.budgets, "the scenario's budgets"))
    outcome = run(config)
    summary = outcome.summary
    window = summary.run.window_s
    if not window:
        raise SystemExit(f"{attr}: no analysis window ({outcome.verdict}: {outcome.reasons})")
    metric, estimate = judged_growth(metrics_json(summary))
    truth = true_growth(outcome.rundir, (window[0], window[1]))
    return {"nominal": RATES[attr], "true": truth, "estimate": estimate, "metric": metric,
            "error": estimate / truth - 1.0, "verdict": outcome.verdict,
            "reason": outcome.reasons[0] if outcome.reasons else ""}


def false_alarms(names: list[str], seeds: int, tmp: Path) -> dict[str, Counter[str]]:
    """Verdicts of every fixed scenario per seed, a busy loop running meanwhile."""
    verdicts: dict[str, Counter[str]] = {name: Counter() for name in names}
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        for seed in range(seeds):
            for name in names:
                options = CheckOptions(out=tmp / f"seed-{seed}", seed=seed)
                result = run_cell(Cell(load_scenario(name), None), options)
                verdicts[name][result.outcome.verdict] += 1
                print(f"  seed {seed} {name}: {result.outcome.verdict}", flush=True)
    finally:
        busy.kill()
        busy.wait()
    return verdicts


def mb(x: float) -> str:
    return f"{x / 1e6:,.1f}"


def report_accuracy(rec: Record, rows: dict[str, dict[str, Any]], duration: float) -> None:
    rec.say(f"Accuracy: {duration:g} s runs (5 s warm-up), default samplers; growth in MB/h.")
    rec.table(["workload", "nominal", "true", "estimated", "error", "metric", "verdict"],
              [[a, mb(r["nominal"]), mb(r["true"]), mb(r["estimate"]), f"{100 * r['error']:+.1f}%",
                r["metric"], r["verdict"]] for a, r in rows.items()])
    for attr, r in rows.items():
        if r["true"] > BUDGET_B_PER_H and r["verdict"] != "leak":
            rec.say(f"{attr} grew above the 'rss: 50 MB/h' budget but got {r['verdict']}: "
                    f"{r['reason']}")
    worst = max(rows, key=lambda a: abs(rows[a]["error"]))
    error = abs(rows[worst]["error"])
    rec.target("growth estimate within 15% of the truth", error <= TARGET_ERROR,
               f"worst {100 * error:.1f}% ({worst})",
               why=f"{100 * (error - TARGET_ERROR):.1f} points over on {worst}")


def report_alarms(rec: Record, verdicts: dict[str, Counter[str]], seeds: int) -> None:
    rec.say(f"False alarms: each fixed scenario at its check duration, seeds 0..{seeds - 1}, "
            "a busy-loop process on one core meanwhile.")
    kinds = sorted({v for c in verdicts.values() for v in c})
    rec.table(["scenario", *kinds], [[n, *(c[k] for k in kinds)] for n, c in verdicts.items()])
    leaks = sum(c["leak"] for c in verdicts.values())
    runs = sum(sum(c.values()) for c in verdicts.values())
    where = ", ".join(f"{n} {c['leak']}/{sum(c.values())}"
                      for n, c in verdicts.items() if c["leak"])
    rec.target("zero false leak verdicts under CPU load", leaks == 0,
               f"{leaks} of {runs} fixed runs said leak", why=f"false alarms on {where}")


def main(argv: list[str] | None = None) -> int:
    full = os.environ.get("BENCH_FULL") == "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default=",".join(RATES) if full else
                        "LEAK_20MB,LEAK_200MB,LEAK_2GB", help="leaky workloads ('' to skip)")
    parser.add_argument("--duration", type=float, default=120.0 if full else 60.0)
    parser.add_argument("--seeds", type=int, default=10,
                        help="seeds per fixed scenario (0 to skip false alarms)")
    parser.add_argument("--scenarios", default="", help="fixed scenarios (default: all)")
    args = parser.parse_args(argv)
    rates = [r for r in args.rates.split(",") if r]
    names = [n for n in args.scenarios.split(",") if n] or scenario_names()
    rec = Record("accuracy", "Accuracy and false alarms", {
        "rates": " ".join(rates) or "none", "duration_s": args.duration, "seeds": args.seeds,
        "scenarios": len(names), "full": full})
    importable_here()
    with tempfile.TemporaryDirectory(prefix="bench-accuracy-") as tmp:
        if rates:
            rows = {attr: accuracy(attr, args.duration, Path(tmp)) for attr in rates}
            rec.figures["accuracy"] = rows
            report_accuracy(rec, rows, args.duration)
        if args.seeds > 0:
            verdicts = false_alarms(names, args.seeds, Path(tmp))
            rec.figures["false_alarms"] = {n: dict(c) for n, c in verdicts.items()}
            report_alarms(rec, verdicts, args.seeds)
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
