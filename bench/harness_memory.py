"""The harness's own memory over a long run: the parent that reads samples live, and the samplers.

1. One real run of ``bench.leaky_scenarios:STEADY`` (the same per-op work as the
leaky workloads, nothing kept) for ``--duration`` seconds with every sampler
at its default interval. The worker's RSS growth is then the samplers' (and
the loop's) own; the parent follows ``samples.jsonl`` live as ``check`` does
(progress callback and an early-stop predicate that reads all samples so far
every second, never true), and its RSS is read twice a second next to the
file's size (a few minutes make too small a file to judge the parent by:
part 2 does). Target: the worker flat, within the ``rss: 50 MB/h`` budget the
scenarios use for "no leak".
2. A replay of a 24 h run at 10 Hz (the lines of ``bench/report_scale.py``):
   the file is written an hour at a time and followed by the parent's own
   ``SampleTail``, RSS read after each hour; then the runner's ``conclude``
   (load, analyse, write the summary) runs with the tail still alive, as it
   is in ``harness.parent.runner.run``. Targets: the parent's RSS does not grow with
   the bytes it has read (under 0.1 B per B), and its peak through the end of
   a 24 h run stays under 1 GiB, the scale target for analysing a 24 h file.

    python bench/harness_memory.py [--duration 600] [--hours 24]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report_scale as scale
from bench.record import Record, importable_here, metrics_json
from harness.config import RunConfig, read_budgets
from harness.parent.runner import conclude, run
from harness.parent.supervisor import Ending, Snapshot
from harness.parent.tail import SampleTail
from harness.runfiles.names import SAMPLES_FILE
from harness.runfiles.rundata import RunData

BUDGET_B_PER_H = 50e6
TARGET_PEAK_B = 2**30
# "Does not grow with file size", with slack for allocator noise: a tenth of a byte
# of RSS per byte of samples read (24 h at 10 Hz is ~115 MB: ~12 MB at most).
FLAT_B_PER_B = 0.1
PARENT_SETTLE_S = 30.0
SPEC = "bench.leaky_scenarios:STEADY"


class ParentWatch:
    """Parent RSS and samples-file size, taken from the runner's own progress callback."""

    def __init__(self, samples: Path) -> None:
        self.samples = samples
        self.me = psutil.Process()
        self.points: list[tuple[float, int, int]] = []  # elapsed s, parent RSS, file bytes

    def __call__(self, snap: Snapshot) -> None:
        size = self.samples.stat().st_size if self.samples.exists() else 0
        self.points.append((snap.elapsed_s, self.me.memory_info().rss, size))


def slope(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.polyfit(x, y, 1)[0])


def live_run(rec: Record, duration: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        config = RunConfig(scenario=SPEC, rundir=tmp, duration_s=duration, warmup_s=5.0,
                           budgets=read_budgets(["rss: 50 MB/h"], "the bench budgets"))
        watch = ParentWatch(config.path / SAMPLES_FILE)

        def never(data: RunData) -> bool:
            return False

        outcome = run(config, stop_when=never, on_progress=watch)
    pts = np.array(watch.points, dtype=np.float64)
    pts = pts[pts[:, 0] >= PARENT_SETTLE_S]
    parent_h = slope(pts[:, 0], pts[:, 1]) * 3600
    file_h = slope(pts[:, 0], pts[:, 2]) * 3600
    worker = metrics_json(outcome.summary).get("rss_growth", {})
    worker_h, ci = float(worker.get("value", float("nan"))), worker.get("ci") or [None, None]
    rec.figures["live"] = {"parent_b_per_h": parent_h, "file_b_per_h": file_h,
                           "worker_b_per_h": worker_h, "worker_ci": ci,
                           "worker_verdict": outcome.verdict}
    rec.say(f"1. real run of {SPEC}, {duration:g} s, default samplers: verdict {outcome.verdict}")
    rec.say(f"samples.jsonl grew {file_h / 1e6:.1f} MB/h, {pts[-1, 2] / 1e6:.2f} MB at the end")
    rec.say(f"parent RSS {pts[0, 1] / 1e6:.1f} MB at {pts[0, 0]:.0f} s, {pts[-1, 1] / 1e6:.1f} MB "
            f"at {pts[-1, 0]:.0f} s: {parent_h / 1e6:+.1f} MB/h (too little data to judge "
            "against file size: see the replay)")
    rec.say(f"worker RSS growth (samplers and loop; the workload keeps nothing): "
            f"{worker_h / 1e6:+.2f} MB/h, 95% CI {fmt_ci(ci)}")
    rec.target("samplers' own memory flat (<= 50 MB/h)", worker_h <= BUDGET_B_PER_H,
               f"{worker_h / 1e6:+.2f} MB/h",
               why=f"{(worker_h - BUDGET_B_PER_H) / 1e6:.1f} MB/h over")


def follow(samples: Path, hours: int) -> tuple[SampleTail, list[tuple[int, int]]]:
    """Write ``hours`` of a 10 Hz run an hour at a time; the tail reads each hour."""
    # As the parent follows a run with no early-stop predicate (run, check's fixed cells).
    me, tail, points = psutil.Process(), SampleTail(samples, keep_all=False), []
    with samples.open("w", encoding="utf-8") as out:
        scale.line(out, {"type": "header", "schema": "leak-harness/samples", "version": 1,
                         "config": {"scenario": "bench-replay"}, "env": {}})
        scale.line(out, {"type": "event", "t": 0.0, "name": "start"})
        for hour in range(hours):
            for s in range(hour * 3600, (hour + 1) * 3600):
                if s == int(scale.WARMUP_S):
                    scale.line(out, {"type": "event", "t": scale.WARMUP_S, "name": "warmup_end"})
                scale.write_second(out, s)
            out.flush()
            tail.poll()
            points.append((samples.stat().st_size, me.memory_info().rss))
        end = hours * 3600
        ops = end * scale.OPS_PER_S
        scale.line(out, {"type": "event", "t": float(end), "name": "loop_end", "ops": ops})
        scale.line(out, {"type": "event", "t": float(end), "name": "end", "ops": ops})
    tail.poll()
    return tail, points


def replay(rec: Record, hours: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        config = RunConfig(scenario="bench-replay", rundir=tmp, duration_s=hours * 3600.0,
                           warmup_s=scale.WARMUP_S,
                           budgets=read_budgets(scale.BUDGETS, "the bench budgets"))
        tail, points = follow(config.path / SAMPLES_FILE, hours)
        began = time.monotonic()
        outcome = conclude(config, Ending("finished", [], 0, hours * 3600.0))
        concluded = time.monotonic() - began
        del tail  # alive until here, as the supervisor is during conclude() in run()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = np.array([p[0] for p in points], dtype=np.float64)
    rss = np.array([p[1] for p in points], dtype=np.float64)
    per_h = float(np.median(np.diff(rss))) if hours > 1 else 0.0
    per_byte = slope(size, rss) if hours > 1 else 0.0
    rec.figures["replay"] = {"hours": hours, "points": points, "b_per_h": per_h,
                             "b_per_file_b": per_byte, "conclude_s": concluded, "peak_b": peak,
                             "verdict": outcome.verdict}
    rec.say(f"2. replay of {hours} h at {scale.HZ} Hz ({size[-1] / 1e6:.0f} MB of samples) "
            "followed by the parent's SampleTail, an hour at a time:")
    rec.table(["hour", "samples MB", "parent RSS MB"],
              [[h + 1, f"{s / 1e6:.0f}", f"{r / 1e6:.0f}"] for h, (s, r) in enumerate(points)
               if h in (0, 1, hours // 4, hours // 2, hours - 1)])
    rec.say(f"parent growth while following: {per_h / 1e6:+.1f} MB per hour of run, "
            f"{per_byte:.2f} bytes of RSS per byte of samples read")
    rec.say(f"then conclude() (load, analyse, summary) with the tail alive: {concluded:.1f} s, "
            f"verdict {outcome.verdict}; parent peak RSS {peak / 2**20:.0f} MiB")
    rec.target(f"parent RSS does not grow with the samples it follows ({hours} h; < "
               f"{FLAT_B_PER_B} B per B read)", per_byte < FLAT_B_PER_B,
               f"{per_byte:.1f} B per B read, {per_h / 1e6:+.1f} MB per hour of run, "
               f"{(rss[-1] - rss[0]) / 1e6:+.0f} MB over the replay",
               why="the tail keeps every sample it has read, as Python tuples in lists")
    rec.target(f"parent peak through the end of a {hours} h run under 1 GiB", peak < TARGET_PEAK_B,
               f"{peak / 2**20:.0f} MiB", why=f"{(peak - TARGET_PEAK_B) / 2**20:.0f} MiB over: the "
               "tail's copy of the samples is still alive while conclude() loads them again")


def fmt_ci(ci: list[float | None]) -> str:
    if ci[0] is None or ci[1] is None:
        return "n/a"
    return f"{ci[0] / 1e6:+.2f} to {ci[1] / 1e6:+.2f} MB/h"


def main(argv: list[str] | None = None) -> int:
    full = os.environ.get("BENCH_FULL") == "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0 if full else 60.0,
                        help="seconds of the real run (0 to skip)")
    parser.add_argument("--hours", type=int, default=24, help="hours replayed (0 to skip)")
    args = parser.parse_args(argv)
    rec = Record("harness_memory", "Harness memory over a long run",
                 {"scenario": SPEC, "duration_s": args.duration, "replay_hours": args.hours,
                  "full": full})
    importable_here()
    if args.duration > 0:
        live_run(rec, args.duration)
    if args.hours > 0:
        replay(rec, args.hours)
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
