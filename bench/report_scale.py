"""Reports at scale: a 24 h run sampled at 10 Hz, loaded, analysed and reported.

Builds a synthetic run folder (864,000 RSS samples, gauges at 2 Hz, gc lines,
garbage and object windows, in the v1 formats) in a temporary directory,
then times, in a fresh process so its peak RSS is the reporting path's own:
loading the samples, ``summarize``, writing ``summary.json`` and
``write_run_report``. Targets: under 30 s and under 1 GiB.

    python bench/report_scale.py [--hours 24] [--keep]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import Record

TARGET_S = 30.0
TARGET_BYTES = 2**30
HZ = 10
OPS_PER_S = 2000
WARMUP_S = 600.0
BUDGETS = ("rss: 50 MB/h", "cyclic_garbage: 0.5 /kop", "work_list: <= 4",
           "tree_nodes: 5000 /h")
GAUGES = ("tree_nodes", "work_list", "full_lru", "mamba_lru", "kv_available", "tombstones")
TYPES = [f"Type{i}" for i in range(20)]
CYCLE = {"type": "TreeNode", "path": ["TreeNode.mamba_prev", "TreeNode.parent"], "length": 2,
         "retained_bytes": 5120, "retained_objects": 12}


def line(out: TextIO, record: dict[str, Any]) -> None:
    out.write(json.dumps(record, separators=(",", ":")) + "\n")


def rss_at(t: float) -> float:
    """2 GB, 150 MB/h of real growth, a 20 MB gen-2 sawtooth each minute, a slow wobble."""
    return 2e9 + 150e6 / 3600 * t + 20e6 * ((t % 60) / 60) + 1e6 * math.sin(t / 7.0)


def write_second(out: TextIO, s: int) -> None:
    """Every line of second ``s``, in time order as the worker writes them."""
    ops = s * OPS_PER_S
    for tick in range(HZ):
        t = s + tick / HZ
        uss = rss_at(t) - 3e8 if tick == 0 else None
        line(out, {"type": "rss", "t": t, "rss": round(rss_at(t)), "uss": uss,
                   "ops": ops + tick * OPS_PER_S // HZ})
        if tick % 5 == 0:
            values = {name: float((s // 10) % 7 if name == "work_list" else 1000 + s // 30)
                      for name in GAUGES}
            line(out, {"type": "gauges", "t": t, "values": values, "ops": ops})
    line(out, {"type": "gc", "t": s + 0.99, "gen": 0, "count": 40, "collected": 800,
               "uncollectable": 0, "pause_s": 0.004, "max_pause_s": 0.0002, "ops": ops})
    if s % 10 == 0:
        line(out, {"type": "gc", "t": s + 0.99, "gen": 1, "count": 4, "collected": 300,
                   "uncollectable": 0, "pause_s": 0.003, "max_pause_s": 0.001, "ops": ops})
    if s % 60 == 59:
        line(out, {"type": "gc", "t": s + 0.995, "gen": 2, "count": 1, "collected": 60_000,
                   "uncollectable": 0, "pause_s": 0.08, "max_pause_s": 0.08, "ops": ops})
    line(out, {"type": "progress", "t": s + 0.999, "ops": ops, "ops_per_s": OPS_PER_S,
               "phase": "warmup" if s < WARMUP_S else "measure"})
    if s % 15 == 14:
        line(out, {"type": "objects", "t": s + 0.999, "ops": ops,
                   "counts": {name: 1000 + i * s // 100 for i, name in enumerate(TYPES)}})
    if s % 30 == 29:
        by_type = {name: 100 + i for i, name in enumerate(TYPES[:10])}
        line(out, {"type": "garbage", "t": s + 0.999, "ops": ops, "collected": 1045,
                   "freed": 1045, "final": False, "count": sum(by_type.values()),
                   "by_type": by_type, "bytes_by_type": {k: v * 96 for k, v in by_type.items()},
                   "bytes": 100_320, "cycles": [CYCLE, CYCLE]})


def build(rundir: Path, hours: float) -> None:
    seconds = int(hours * 3600)
    config = {"scenario": "bench-scale", "duration_s": float(seconds), "warmup_s": WARMUP_S,
              "inject": ["bench-leak"], "budgets": list(BUDGETS),
              "samplers": ["rss", "gc", "garbage", "objects", "gauges"]}
    with (rundir / "samples.jsonl").open("w", encoding="utf-8") as out:
        line(out, {"type": "header", "schema": "leak-harness/samples", "version": 1,
                   "config": config, "env": {"python": sys.version.split()[0]}})
        line(out, {"type": "event", "t": 0.0, "name": "start"})
        for s in range(seconds):
            if s == int(WARMUP_S):
                line(out, {"type": "event", "t": WARMUP_S, "name": "warmup_end"})
            write_second(out, s)
        line(out, {"type": "event", "t": float(seconds), "name": "end",
                   "ops": seconds * OPS_PER_S})


def measure(rundir: Path) -> None:
    """The timed part, run in a fresh process: load, analyse, write summary and report.

    Its figures go to ``measure.json`` in the run folder, for the parent to record."""
    from harness.analysis.summary import summarize
    from harness.config import read_budgets
    from harness.runfiles.reader import LoadedRun, load_samples
    from harness.runfiles.summary import Summary, write_summary
    from reports.run import write_run_report

    start = time.perf_counter()
    run = load_samples(rundir / "samples.jsonl")
    loaded = time.perf_counter()
    analysis = summarize(run, read_budgets(BUDGETS, "the bench budgets"), WARMUP_S)
    analysed = time.perf_counter()
    end = run.event("end") or {"type": "event", "t": 0.0, "name": "end"}
    summary = Summary(
        scenario="bench-scale", injected=["bench-leak"], verdict=analysis.verdict,
        reasons=analysis.reasons, metrics=dict(analysis.metrics),
        time_to_detect_s=analysis.time_to_detect_s, duration_s=float(end.get("t", 0.0)),
        ops=int(end.get("ops", 0)), command="python bench/report_scale.py",
    )
    write_summary(rundir, summary)
    write_run_report(LoadedRun(rundir, summary, run))
    done = time.perf_counter()
    figures = {
        "rss_samples": len(run.rss), "gauge_samples": sum(len(g) for g in run.gauges.values()),
        "gc_lines": len(run.gc_events), "verdict": analysis.verdict,
        "load_s": loaded - start, "analysis_s": analysed - loaded, "report_s": done - analysed,
        "wall_s": done - start,
        "peak_b": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
    }
    (rundir / "measure.json").write_text(json.dumps(figures))


def verdict(rec: Record, f: dict[str, Any]) -> None:
    wall_s, peak = f["wall_s"], f["peak_b"]
    rec.say(f"samples: {f['rss_samples']:,} rss, {f['gauge_samples']:,} gauge, "
            f"{f['gc_lines']:,} gc lines; verdict {f['verdict']}")
    rec.say(f"load {f['load_s']:.1f} s, analysis {f['analysis_s']:.1f} s, "
            f"report {f['report_s']:.1f} s")
    rec.target("load + analyse + report a 24 h file under 30 s", wall_s <= TARGET_S,
               f"{wall_s:.1f} s", why=f"{wall_s - TARGET_S:.1f} s over ({wall_s / TARGET_S:.2f}x)")
    rec.target("... and under 1 GiB peak RSS", peak <= TARGET_BYTES, f"{peak / 2**20:.0f} MiB",
               why=f"{(peak - TARGET_BYTES) / 2**20:.0f} MiB over ({peak / TARGET_BYTES:.2f}x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0, help="run length (default 24)")
    parser.add_argument("--keep", action="store_true", help="keep the run folder and say where")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return 0
    rec = Record("report_scale", "Reports at scale", {"hours": args.hours, "hz": HZ})
    rundir = Path(tempfile.mkdtemp(prefix="report-scale-"))
    try:
        began = time.perf_counter()
        build(rundir, args.hours)
        size = (rundir / "samples.jsonl").stat().st_size
        rec.say(f"built {args.hours:g} h at {HZ} Hz: {size / 1e6:.0f} MB of samples "
                f"in {time.perf_counter() - began:.1f} s (not timed below)")
        child = subprocess.run([sys.executable, __file__, "--measure", str(rundir)], check=False)
        if child.returncode != 0:
            return child.returncode
        rec.figures = json.loads((rundir / "measure.json").read_text())
        verdict(rec, rec.figures)
        if args.keep:
            rec.say(f"run folder kept: {rundir}")
        rec.publish()
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(rundir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
