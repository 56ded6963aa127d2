"""What sampling costs the workload: ops/s with the default samplers vs none, and per sampler.

1. Through real workers: for each scenario, ``--pairs`` pairs of short runs, one
   with the default samplers and one with ``samplers=()``, interleaved A B B A
   so drift cancels. Both runs of a pair use one seed and run the same number
   of ops (what a calibration run without samplers did in ``--duration``
   seconds), and are measured over the same op range (from the op count that
   run reached at ``--warmup``): they do the very same work, so the workload's
   own changes of pace (eviction phases, bursts) cancel, which a fixed
   duration does not. Ops per wall second and per CPU second of the worker
   come from ``bench/cpu_clock.py``, which logs both clocks against ops. The
   cost is ``1 - default/none`` per pair: median, min and max. On a shared machine
   wall time also measures the other jobs, so a CPU-bound worker is judged on
   CPU time; a lag-bound one (PP, waiting on its peer) on wall time (``lost``).
   A run this short sees no garbage (30 s) or objects (15 s) window, so
   their cost at the default interval is added from part 2 (time per call /
   interval).
2. In this process, on one live workload per scenario, driven by the worker's
   own loop (``bench/overhead_alone.py``): each sampler's own CPU, measured
   directly, as a share of the loop's; the garbage and objects windows timed
   per call; tracemalloc's cost for comparison.

Target: default sampling costs at most 3% of ops/s (the rules: ``judge``).

    python bench/sampler_overhead.py [--pairs 6] [--duration 10] [--scenarios a,b]
    python bench/sampler_overhead.py --scenarios radix-steady --duration 20 --warmup 10 \
        --attribute 30 --section "after the first 10 s"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cpu_clock import LOG_FILE
from bench.overhead_alone import CONTINUOUS, in_process
from bench.record import Record, importable_here
from harness.config import RunConfig, SamplerIntervals
from harness.parent.runner import run
from harness.registry import scenario_names
from harness.runfiles.samples import SampleWriter
from harness.verdicts import ENDING_VERDICTS
from harness.worker.samplers import SAMPLER_NAMES

TARGET = 0.03
CPU_BOUND = 0.9  # cores a worker keeps busy without samplers: CPU-bound, not lag-bound
DEFAULTS = SamplerIntervals()


@dataclass(frozen=True)
class Rates:
    wall: float  # ops per wall second
    cpu: float  # ops per CPU second of the worker (all threads)

    @property
    def util(self) -> float:
        """Cores the worker kept busy: well under 1 when the workload waits (PP peer lag)."""
        return self.wall / self.cpu


@dataclass(frozen=True)
class Span:
    """The op range both runs of a pair are measured over; runs stop at ``last``."""

    first: int
    last: int


def clock_log(scenario: str, config: RunConfig) -> np.ndarray:
    """One real worker run: its (ops, CPU s, wall s) per step, as columns."""
    outcome = run(config)
    log = config.path / LOG_FILE
    if outcome.verdict in ENDING_VERDICTS or not log.exists():
        raise SystemExit(f"{scenario}: the run did not finish its loop ({outcome.verdict}: "
                         f"{'; '.join(outcome.reasons)})")
    return np.array(json.loads(log.read_text()), dtype=np.float64).T


def spec_of(scenario: str) -> str:
    return f"bench.cpu_clock:{scenario.replace('-', '_')}"


def calibrate(scenario: str, duration: float, warmup: float, rundir: Path) -> Span:
    """The ops a run without samplers does in ``duration`` s, and those done by ``warmup``."""
    config = RunConfig(scenario=spec_of(scenario), rundir=str(rundir), duration_s=duration,
                       warmup_s=warmup, samplers=())
    ops, _, wall = clock_log(scenario, config)
    # wall[0] is when the workload was built (a PP rendezvous can take a second);
    # the loop starts with the first step.
    first = int(np.interp(wall[1] + warmup, wall, ops))
    return Span(first, max(int(ops[-1]), first + 1))


def worker_rates(scenario: str, samplers: tuple[str, ...], rundir: Path, span: Span,
                 warmup: float, seed: int) -> Rates:
    """Ops per wall second and per CPU second over ``span`` of one real worker run."""
    config = RunConfig(scenario=spec_of(scenario), rundir=str(rundir), duration_s=None,
                       max_ops=span.last, warmup_s=warmup, seed=seed, samplers=samplers)
    ops, cpu, wall = clock_log(scenario, config)
    ends = [span.first, span.last]
    done = span.last - span.first
    cpu_s = float(np.diff(np.interp(ends, ops, cpu))[0])
    wall_s = float(np.diff(np.interp(ends, ops, wall))[0])
    return Rates(done / wall_s, done / cpu_s)


def paired_costs(
    scenario: str, pairs: int, duration: float, warmup: float, tmp: Path
) -> dict[str, list[float]]:
    """Per pair of runs (A B then B A): ``1 - default/none`` by wall and by CPU time, the
    worker's cores in use without samplers, and the samplers' CPU ms per wall second."""
    found: dict[str, list[float]] = {"wall": [], "cpu": [], "util": [], "ms_per_s": []}
    span = calibrate(scenario, duration, warmup, tmp / f"{scenario}-calibrate")
    for i in range(pairs):
        rates: dict[str, Rates] = {}
        for which in (("default", "none") if i % 2 == 0 else ("none", "default")):
            samplers = SAMPLER_NAMES if which == "default" else ()
            rundir = tmp / f"{scenario}-{i}-{which}"
            rates[which] = worker_rates(scenario, samplers, rundir, span, warmup, seed=i)
        on, off = rates["default"], rates["none"]
        found["wall"].append(1.0 - on.wall / off.wall)
        found["cpu"].append(1.0 - on.cpu / off.cpu)
        found["util"].append(off.util)
        found["ms_per_s"].append(1000.0 * (1.0 / on.cpu - 1.0 / off.cpu) * on.wall)
    return found


def spread(costs: list[float]) -> str:
    return f"{pct(statistics.median(costs))} ({pct(min(costs))}..{pct(max(costs))})"


def report(rec: Record, pairs: int, duration: float, attribute: float, rounds: int) -> None:
    figs: dict[str, dict[str, Any]] = rec.figures
    rec.say("Cost = 1 - ops/s with / ops/s without; negative is noise. Median (min..max).")
    rec.say(f"Workers: {pairs} pairs of runs (A B, B A); both runs of a pair do the same ops "
            f"(one seed, the op count of a {duration:g} s run without samplers) and are measured "
            "over the same op range after warm-up, by wall time and by the worker's CPU time. "
            "Windows: the garbage and objects windows' time per call over their default intervals "
            f"({DEFAULTS.garbage_s:g} s, {DEFAULTS.objects_s:g} s), which runs this short never "
            "reach. Total = ops/s lost + windows; ops/s lost is judged by CPU time where the "
            "worker is CPU-bound (the machine is shared, so wall time also measures the other "
            "jobs) and by wall time where it is lag-bound (cores under "
            f"{CPU_BOUND:g}: it waits on its PP peer, and sampling runs in that wait). Cores: "
            "CPU per wall second of the worker without samplers; sampler ms/s: the samplers' "
            "extra CPU per wall second.")
    rec.table(["scenario", "by wall time", "by CPU time", "windows", "total", "cores",
               "sampler ms/s"],
              [[n, spread(f["pairs"]["wall"]), spread(f["pairs"]["cpu"]), pct(f["windows"]),
                pct(f["total"]), f"{statistics.median(f['pairs']['util']):.2f}",
                f"{statistics.median(f['pairs']['ms_per_s']):.0f}"] for n, f in figs.items()])
    rec.say(f"Alone, in-process ({attribute:g} s of the worker's loop, every default sampler "
            "on): each continuous sampler's own CPU as a share of the loop's CPU, its thread "
            "included; garbage and objects: ms per window (median of 3) and the share at their "
            "default interval; sum: all of these, a lower bound of the default samplers' cost "
            f"(no indirect effects); tracemalloc: cost in ops per CPU second, {rounds} rounds "
            "of 1 s blocks (in the PP scenarios, idle gaps make such blocks noise).")
    rec.table(["scenario", *CONTINUOUS, "garbage ms", "at 30 s", "objects ms", "at 15 s", "sum",
               "tracemalloc"],
              [[n, *(pct(f["alone"][v]) for v in CONTINUOUS),
                f"{1000 * f['alone']['garbage_call_s']:.0f}",
                pct(f["alone"]["garbage_call_s"] / DEFAULTS.garbage_s),
                f"{1000 * f['alone']['objects_call_s']:.0f}",
                pct(f["alone"]["objects_call_s"] / DEFAULTS.objects_s),
                pct(direct_sum(f)),
                pct(f["alone"]["tracemalloc"])] for n, f in figs.items()])
    judge(rec, figs)


def judge(rec: Record, figs: dict[str, dict[str, Any]]) -> None:
    """The target, by three named rules, on the ops/s each pair lost (``lost``).

    ``pooled``: the median cost over every pair of every scenario, plus the
    mean windows cost, is at most 3%. ``consistent``: no scenario has every one
    of its pairs above 3% (after its windows). A single scenario's median of a
    few pairs is within the noise of a shared machine (see the spreads), so one
    high median alone is not a miss; every pair of a scenario over the line is,
    like CPython's refleak rule that counts a leak only when every run grew.
    ``direct``: on every CPU-bound scenario, the samplers' own CPU measured
    directly, windows included, is at most 3%: a lower bound with little noise.
    """
    lag_bound = [n for n, f in figs.items() if not cpu_bound(f)]
    clocks = "by CPU time" + (f" (wall time for lag-bound {', '.join(lag_bound)})"
                              if lag_bound else "")
    pooled = statistics.median([c for f in figs.values() for c in lost(f)])
    pooled += statistics.mean(f["windows"] for f in figs.values())
    rec.target("default sampling costs at most 3% of ops/s (pooled over scenarios)",
               pooled <= TARGET, f"{pct(pooled)} {clocks}, windows included",
               why=f"{100 * (pooled - TARGET):.1f} points over")
    over = {n: lost(f) for n, f in figs.items() if min(lost(f)) + f["windows"] > TARGET}
    rec.target("... and no scenario with every pair above 3%", not over,
               "; ".join(f"{n} {spread(c)}" for n, c in over.items()) or "none",
               why="every pair of these scenarios cost more than 3% of their ops/s.")
    judge_direct(rec, figs)


def cpu_bound(fig: dict[str, Any]) -> bool:
    """The worker keeps at least ``CPU_BOUND`` cores busy without samplers."""
    return bool(statistics.median(fig["pairs"]["util"]) >= CPU_BOUND)


def lost(fig: dict[str, Any]) -> list[float]:
    """Per pair, the share of ops/s sampling cost, by the clock that measures it.

    A CPU-bound worker loses the ops its samplers' CPU would have done: CPU
    time measures that, and unlike wall time it leaves out the other jobs of a
    shared machine. A lag-bound worker (the PP ones wait on their peer) runs
    its samplers in time the loop would spend waiting, so their CPU is no lost
    ops; its ops/s is set by the peer, and wall time measures it precisely
    (see the table's two columns).
    """
    return list(fig["pairs"]["cpu"] if cpu_bound(fig) else fig["pairs"]["wall"])


def judge_direct(rec: Record, figs: dict[str, dict[str, Any]]) -> None:
    bound = {n: direct_sum(f) for n, f in figs.items() if cpu_bound(f)}
    if not bound:
        return
    worst = max(bound, key=bound.__getitem__)
    alone = figs[worst]["alone"]
    biggest = max(CONTINUOUS, key=alone.__getitem__)
    rec.target("... and the samplers' own CPU, measured directly, at most 3% on every CPU-bound "
               "scenario", bound[worst] <= TARGET,
               f"worst {pct(bound[worst])} ({worst}); {len(bound)} CPU-bound scenarios",
               why=f"{100 * (bound[worst] - TARGET):.1f} points over on {worst}, where the "
               f"largest part is the {biggest} sampler ({pct(alone[biggest])})")


def direct_sum(fig: dict[str, Any]) -> float:
    return float(sum(fig["alone"][v] for v in CONTINUOUS) + fig["windows"])


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def main(argv: list[str] | None = None) -> int:
    full = os.environ.get("BENCH_FULL") == "1"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10 if full else 6, help="worker run pairs")
    parser.add_argument("--duration", type=float, default=10.0 if full else 5.0,
                        help="seconds per worker run (warm-up included)")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--attribute", type=float, default=20.0 if full else 6.0,
                        help="seconds of the in-process loop whose CPU is attributed")
    parser.add_argument("--rounds", type=int, default=6 if full else 2,
                        help="tracemalloc rounds (two 1 s blocks each)")
    parser.add_argument("--scenarios", default="", help="comma-separated (default: all)")
    parser.add_argument("--section", default="",
                        help="record under 'Sampler overhead: SECTION' (e.g. longer runs)")
    args = parser.parse_args(argv)
    names = [n for n in args.scenarios.split(",") if n] or scenario_names()
    slug = re.sub(r"[^A-Za-z0-9,.]+", "-", args.section).strip("-")
    rec = Record("sampler_overhead" + (f"-{slug}" if slug else ""),
                 "Sampler overhead" + (f": {args.section}" if args.section else ""), {
        "pairs": args.pairs, "duration_s": args.duration, "warmup_s": args.warmup,
        "attribute_s": args.attribute, "rounds": args.rounds, "scenarios": len(names),
        "full": full})
    importable_here()
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        sink = SampleWriter(Path(tmp) / "inprocess.jsonl")
        for name in names:
            pairs = paired_costs(name, args.pairs, args.duration, args.warmup, Path(tmp))
            alone = in_process(name, args.attribute, args.rounds, sink)
            windows = (alone["garbage_call_s"] / DEFAULTS.garbage_s
                       + alone["objects_call_s"] / DEFAULTS.objects_s)
            fig: dict[str, Any] = {"pairs": pairs, "alone": alone, "windows": windows}
            fig["total"] = statistics.median(lost(fig)) + windows
            rec.figures[name] = fig
            print(f"  {name}: pairs by wall {[pct(c) for c in pairs['wall']]}, by CPU "
                  f"{[pct(c) for c in pairs['cpu']]}", flush=True)
        sink.close()
    report(rec, args.pairs, args.duration, args.attribute, args.rounds)
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
