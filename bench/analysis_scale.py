"""How long and how much memory ``summarize`` takes on a 24 h, 10 Hz run.

Builds a synthetic RunData the size a nightly run produces (864,000 samples
per series, gc lines every second, garbage and object windows), with a leak in
every signal so that time to detect replays the rules on prefixes too (the
expensive path), then prints wall time and peak RSS of the analysis.

    .venv/bin/python bench/analysis_scale.py [--hours 24] [--hz 10]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
from scipy.signal import lfilter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable without install

from bench.record import Record
from harness.analysis.summary import summarize
from harness.config import read_budgets
from harness.runfiles.records import GarbageLine, GcLine, HeaderLine, ObjectsLine
from harness.runfiles.rundata import RunData, Series

BUDGETS = [
    "rss: 50 MB/h",
    "uss: 50 MB/h",
    "cyclic_garbage: 0.5 /kop",
    "work_list: <= 4",
    "detached_nodes: 100 /h",
]
OPS_PER_S = 2000.0


def peak_rss_mb() -> float:
    """Peak resident set of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def series(t: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """RSS and USS: 200 MB/h leak, gen-2 sawtooth every 10 min, correlated noise."""
    shocks = rng.normal(0.0, 5e6 * np.sqrt(1 - 0.999**2), t.size)
    noise = lfilter([1.0], [1.0, -0.999], shocks)
    rss = 2e9 + 200e6 / 3600 * t + 150e6 * ((t % 600) / 600) + noise
    return rss, rss - 3e8


def gc_lines(hours: float) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for second in range(1, int(hours * 3600) + 1):
        ops = second * OPS_PER_S
        lines.append({"t": float(second), "gen": 0, "count": 80, "collected": 1500,
                      "uncollectable": 0, "pause_s": 0.004, "ops": ops})
        lines.append({"t": float(second), "gen": 1, "count": 8, "collected": 200,
                      "uncollectable": 0, "pause_s": 0.002, "ops": ops})
        if second % 60 == 0:
            lines.append({"t": float(second), "gen": 2, "count": 1, "collected": 90_000,
                          "uncollectable": 0, "pause_s": 0.08, "ops": ops})
    return lines


def windows(hours: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cycle = {"type": "TreeNode", "path": ["TreeNode.mamba_prev", "TreeNode.parent"],
             "length": 2, "retained_bytes": 4096}
    names = [f"Type{i}" for i in range(48)] + ["TreeNode", "dict"]
    garbage = [
        {"t": t, "ops": t * OPS_PER_S, "count": 40_000, "collected": 40_000,
         "by_type": {"TreeNode": 10_000, "dict": 10_000, "list": 10_000, "tuple": 10_000},
         "bytes_by_type": {"TreeNode": 560_000, "dict": 2_320_000, "list": 880_000,
                           "tuple": 640_000}, "cycles": [cycle, cycle, cycle]}
        for t in np.arange(30.0, hours * 3600, 30.0)
    ]
    objects = [
        {"t": t, "ops": t * OPS_PER_S, "counts": {n: 1000 + int(t) // 10 for n in names}}
        for t in np.arange(0.0, hours * 3600, 15.0)
    ]
    return garbage, objects


def build(hours: float, hz: float) -> RunData:
    rng = np.random.default_rng(0)
    t = np.arange(int(hours * 3600 * hz), dtype=np.float64) / hz
    rss, uss = series(t, rng)
    garbage, objects = windows(hours)
    # Synthetic lines with the fields the analysis reads, not every field a worker writes.
    return RunData(
        header=cast(HeaderLine, {"type": "header", "schema": "leak-harness/samples",
                                 "version": 1}),
        rss=Series(t, rss, "B"),
        uss=Series(t, uss, "B"),
        ops=Series(t, t * OPS_PER_S, "ops"),
        gauges={
            "work_list": Series(t, np.floor(t / 10.0), ""),
            "detached_nodes": Series(t, np.floor(t * 0.5) + rng.integers(0, 50, t.size), ""),
        },
        gc_events=cast("list[GcLine]", gc_lines(hours)),
        garbage_windows=cast("list[GarbageLine]", garbage),
        object_windows=cast("list[ObjectsLine]", objects),
        events=[{"type": "event", "name": "warmup_end", "t": 60.0}],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--hz", type=float, default=10.0)
    args = parser.parse_args(argv)
    rec = Record("analysis_scale", "Analysis at scale", {"hours": args.hours, "hz": args.hz})
    run = build(args.hours, args.hz)
    before = peak_rss_mb()
    began = time.perf_counter()
    analysis = summarize(run, read_budgets(BUDGETS, "the bench budgets"))
    elapsed = time.perf_counter() - began
    after = peak_rss_mb()
    rec.figures = {"samples": len(run.rss), "gc_lines": len(run.gc_events), "summarize_s": elapsed,
                   "peak_mb_built": before, "peak_mb_analysed": after,
                   "time_to_detect_s": analysis.time_to_detect_s}
    rec.say(f"samples per series: {len(run.rss):,}; gc lines: {len(run.gc_events):,}")
    rec.say(f"verdict: {analysis.verdict}; time to detect: {analysis.time_to_detect_s} s")
    rec.say(f"summarize: {elapsed:.2f} s wall (in-process, the run built in memory; the "
            "load-analyse-report path is timed by report_scale)")
    rec.say(f"peak RSS: {before:.0f} MB after building the run, {after:.0f} MB after analysis "
            f"(analysis added {after - before:.0f} MB at most)")
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
