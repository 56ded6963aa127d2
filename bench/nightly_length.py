"""The nightly job's own length: fixed caches and a slow malloc leak judged at 30 minutes.

Each fixed scenario (the four LRU caches and the HiCache multi-turn one by
default) runs for the night's length, two at a time as a nightly shard runs
them, through the harness's own path (a real worker, the default samplers, the
scenario's budgets and calibration). Beside them, the leak zoo's
``native_malloc`` target leaks 5 MB/h through ``malloc`` on ``radix-steady``.

Per fixed run and signal: the verdict, the judged slope, and the resolution
the run states (half the slope's 95% interval plus the calibrated healthy
allowance over the same window). Per leak run: the verdict, the signal that
convicted it, its estimate and when it was detected. The fixed runs' healthy
growth is also written as calibration points (``--points``: the file
``bench/calibrate.py --add`` takes), so the 30-minute allowance can be
measured the way the shorter ones are instead of extrapolated.

Every finished run's row is saved in ``--keep`` at once (a long bench that is
stopped keeps what it measured); ``--publish-only`` builds the record from
those rows without running anything.

Targets (issue 35): every fixed scenario ``pass`` at 30 minutes; heap
resolution at most 0.2 MB/h on the four fixed LRU caches; a 5 MB/h malloc leak
confirmed (``leak``).

    python bench/nightly_length.py [--duration 30m] [--jobs 2] [-k radix,mamba]
                                   [--keep DIR] [--points FILE] [--publish-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibrate import calibration, healthy_growth
from bench.record import ROOT, Record, importable_here, metrics_json
from bench.resolution import SIGNALS, UNITS, cell, signal_figures
from bench.zoo.targets import ZOO
from harness.analysis.calibration import FORMAT
from harness.configure import scenario_config
from harness.parent.runner import reanalyse, run
from harness.registry import load_scenario
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.units import format_duration, format_rate, parse_duration

FIXED = ("radix-steady", "mamba-lru", "swa-lru", "unified-lru", "hiradix-multiturn")
LRU_CACHES = FIXED[:4]
LEAK_TARGET, LEAK_RATE, LEAK_SCENARIO = "native_malloc", 5e6, "radix-steady"
HEAP_TARGET = 0.2e6  # B/h, issue 35
LEAK_FOLDER = f"{LEAK_TARGET}-{LEAK_RATE / 1e6:g}MBh"
SEED = 21  # a seed no calibration run used (calibrate.py: 0 to 7; resolution: 11)


def fixed_row(name: str, duration_s: float, keep: Path) -> dict[str, Any]:
    rundir = keep / f"{name}-fixed"
    outcome = run(scenario_config(load_scenario(name), rundir, duration_s=duration_s, seed=SEED))
    return {"scenario": name, "kind": "fixed", "duration_s": duration_s,
            "verdict": outcome.verdict, "reasons": outcome.summary.reasons[:3],
            "points": [list(p) for p in healthy_growth(rundir, name)],
            **signal_figures(metrics_json(outcome.summary))}


def leak_row(duration_s: float, keep: Path) -> dict[str, Any]:
    target = next(t for t in ZOO if t.name == LEAK_TARGET)
    rundir = keep / LEAK_FOLDER
    config = scenario_config(load_scenario(LEAK_SCENARIO), rundir, duration_s=duration_s,
                             seed=SEED, target=target.spec)
    outcome = run(dataclasses.replace(config, options={"cache": {"rate": LEAK_RATE}}))
    summary = outcome.summary
    convicting = [(key, m) for key, m in metrics_json(summary).items()
                  if m.get("status") == "leak"]
    return {"scenario": LEAK_SCENARIO, "kind": f"{LEAK_TARGET} at {LEAK_RATE / 1e6:g} MB/h",
            "duration_s": duration_s, "verdict": outcome.verdict,
            "detect_s": summary.time_to_detect_s, "reasons": summary.reasons[:3],
            "convicted_by": [{"metric": key, "value": m.get("value"), "ci": m.get("ci"),
                              "unit": m.get("unit")} for key, m in convicting],
            "where": summary.where_it_grows()[:2]}


def rejudged(rundir: Path, scenario: str) -> dict[str, Any] | None:
    """The run's samples judged again under the budgets today's code gives a run of its
    length (its header holds those it ran with), or None when they are the same.

    The samples are what was measured; a budget is a rule applied to them afterwards,
    so a run made before a budget changed can be judged by the new one."""
    lines = (rundir / SAMPLES_FILE).read_text(encoding="utf-8").split("\n", 1)
    head = json.loads(lines[0])
    config = head["config"]
    today = scenario_config(load_scenario(scenario), rundir, duration_s=config["duration_s"])
    if list(today.budget_texts) == config["budgets"]:
        return None
    with tempfile.TemporaryDirectory(prefix="bench-rejudge-") as tmp:
        copy = Path(tmp) / rundir.name
        shutil.copytree(rundir, copy, ignore=shutil.ignore_patterns(SUMMARY_FILE, "*.png",
                                                                     "*.html"))
        head["config"] = {**config, "budgets": list(today.budget_texts)}
        (copy / SAMPLES_FILE).write_text(json.dumps(head) + "\n" + lines[1], encoding="utf-8")
        outcome = reanalyse(copy)
    changed = sorted(set(today.budget_texts) - set(config["budgets"]))
    return {"budgets": changed, "verdict": outcome.verdict,
            "detect_s": outcome.summary.time_to_detect_s,
            "reasons": outcome.summary.reasons[:1], "where": outcome.summary.where_it_grows()[:1]}


def run_one(job: str, duration_s: float, keep: Path) -> dict[str, Any]:
    """One run's row, saved at once; a run that fails to start is a row that says so."""
    try:
        row = leak_row(duration_s, keep) if job == LEAK_TARGET else \
            fixed_row(job, duration_s, keep)
    except Exception as exc:  # one broken run must not lose the others' figures
        row = {"scenario": job, "kind": "error", "duration_s": duration_s,
               "verdict": "error", "reasons": [str(exc)]}
    (keep / f"row-{job}.json").write_text(json.dumps(row, indent=1), encoding="utf-8")
    print(f"  {job}: {row['verdict']} after {format_duration(duration_s)}"
          f"{'; ' + row['reasons'][0] if row['verdict'] != 'pass' and row['reasons'] else ''}",
          flush=True)
    return row


def publish(rec: Record, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    fixed = [r for r in rows if r["kind"] == "fixed"]
    rec.say(f"Fixed caches at {args.duration}, seed {SEED}, {args.jobs} runs at once. "
            "Resolution = half the judged slope's 95% interval (noise) + the healthy allowance "
            "over the same window, as each run states it.")
    rec.table(["scenario", "verdict", *SIGNALS],
              [[r["scenario"], r["verdict"], *(cell(r, s) for s in SIGNALS)] for r in fixed])
    rec.table(["scenario", "signal", "judged slope", "status"],
              [[r["scenario"], s, format_rate(r[s]["slope"], UNITS[s]), r[s]["status"]]
               for r in fixed for s in SIGNALS if s in r])
    passing = [r for r in fixed if r["verdict"] == "pass"]
    rec.target(f"every fixed scenario pass at {args.duration}", len(passing) == len(fixed),
               f"{len(passing)} of {len(fixed)} pass: " + ", ".join(
                   f"{r['scenario']} {r['verdict']}" for r in fixed))
    heap = [(r["heap"]["resolution"], r["scenario"]) for r in fixed
            if r["scenario"] in LRU_CACHES and "heap" in r]
    if heap:
        worst, who = max(heap)
        rec.target(f"heap resolution at most {format_rate(HEAP_TARGET, 'B/h')} on the fixed "
                   f"LRU caches at {args.duration}", worst <= HEAP_TARGET,
                   f"worst {format_rate(worst, 'B/h')} ({who}) over {len(heap)} scenarios")
    for leak in (r for r in rows if r["kind"] not in ("fixed", "error")):
        by = ", ".join(f"{c['metric']} {format_rate(c['value'], c['unit'])}"
                       for c in leak["convicted_by"] if c["unit"].endswith("/h")) or "nothing"
        detected = "not detected" if leak["detect_s"] is None else \
            f"detected after {leak['detect_s']:.0f} s"
        rec.say(f"{leak['kind']} on {leak['scenario']}: {leak['verdict']}, convicted by {by}, "
                f"{detected}. Where it grows: {leak['where'][0] if leak['where'] else '-'}")
        again = rejudged(args.keep / LEAK_FOLDER, leak["scenario"])
        if again is not None:
            first = again["reasons"][0] if again["reasons"] else ""
            rec.say(f"The same samples judged with today's budgets for a run this long "
                    f"({', '.join(again['budgets'])}): {again['verdict']}, detected after "
                    f"{again['detect_s'] or 0:.0f} s; {first} Where it grows: "
                    f"{again['where'][0] if again['where'] else '-'}")
        verdict = again["verdict"] if again is not None else leak["verdict"]
        rec.target(f"a {leak['kind']} leak confirmed (leak) at {args.duration}",
                   verdict == "leak", f"{verdict}" + (" (today's budgets, same samples)"
                                                      if again is not None else f", by {by}"))
    for broken in (r for r in rows if r["kind"] == "error"):
        rec.say(f"{broken['scenario']} could not run: {broken['reasons'][0]}")
    rec.publish()


def write_points(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    points = [(p[0], p[1], float(p[2]), float(p[3])) for r in rows if r["kind"] == "fixed"
              for p in r["points"]]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    document = {"format": FORMAT, "measured": now,
                "how": f"bench/nightly_length.py --duration {args.duration} --jobs {args.jobs} "
                       f"(seed {SEED}); one point per fixed run, as bench/calibrate.py",
                "signals": calibration(points)}
    args.points.write_text(json.dumps(document, indent=1), encoding="utf-8")
    print(f"calibration points written to {args.points} (add them: "
          f"python bench/calibrate.py --add {args.points})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="30m")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("-k", dest="select", default=",".join([*FIXED, LEAK_TARGET]))
    parser.add_argument("--keep", type=Path, default=ROOT / "results" / "bench-nightly-length")
    parser.add_argument("--points", type=Path, default=None, metavar="FILE")
    parser.add_argument("--publish-only", action="store_true")
    args = parser.parse_args(argv)
    duration_s = parse_duration(args.duration)
    jobs = [j for j in (LEAK_TARGET, *FIXED) if any(k in j for k in args.select.split(","))]
    args.keep.mkdir(parents=True, exist_ok=True)
    # Made before the runs: its wall time and load cover them.
    rec = Record("nightly_length", "The nightly length: 30-minute runs",
                 {"duration": args.duration, "jobs": args.jobs, "seed": SEED,
                  "scenarios": " ".join(j for j in jobs if j != LEAK_TARGET)})
    if not args.publish_only:
        importable_here()
        print(f"{len(jobs)} runs of {args.duration}, {args.jobs} at once; rows in {args.keep}",
              flush=True)
        with ThreadPoolExecutor(args.jobs) as pool:
            for future in [pool.submit(run_one, j, duration_s, args.keep) for j in jobs]:
                future.result()
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(args.keep.glob("row-*.json"))]
    rows = [r for r in rows if r["scenario"] in jobs or r["kind"] != "fixed"]
    publish(rec, rows, args)
    if args.points is not None:
        write_points(rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
