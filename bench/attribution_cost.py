"""What attribution costs: the same runs with the allocation windows on and off.

For a few zoo targets on ``radix-steady`` (the fixed cache and leaks of three
kinds), ``--seeds`` pairs of runs of ``--duration`` seconds, one with every
default sampler and one without the attribution samplers (``--no-attribution``:
no tracemalloc windows, no owner search at the end). Both runs of a pair share
the seed and run one after the other, so the machine's other load hits both.
Reported per target: the judged heap and py_blocks rates with attribution on
and off (ratio; the target compares the rates that judged a leak), ops per
second of the measured window, and the wall time of the whole run (worker start
to summary).

Targets: judged rates with attribution on within 5% of off; wall time at most 10% longer.
Two runs never see the same machine, so one pair's ratio carries both runs'
noise (a dict leak's heap is a staircase of table resizes: its slope moves with
where the steps fall). The rate target compares, per target and signal, the
median rate over the seeds with attribution on against the median with it
off; the worst single pair and the seed-to-seed spread of the off runs are
printed beside it, as the yardstick of that noise.

    python bench/attribution_cost.py [--seeds 2] [--duration 30] [-k fixed,native_malloc]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import Record, importable_here, metrics_json
from bench.zoo.targets import BY_NAME
from harness.configure import scenario_config
from harness.parent.runner import run
from harness.registry import load_scenario
from harness.worker.samplers import ATTRIBUTION_SAMPLERS, SAMPLER_NAMES

TARGETS = ("fixed", "dict_retention", "tensor_views", "native_malloc")
SIGNALS = ("heap", "py_blocks")


def one_run(
    target: str, seed: int, duration_s: float, attribution: bool, out: Path
) -> dict[str, Any]:
    samplers = tuple(n for n in SAMPLER_NAMES if attribution or n not in ATTRIBUTION_SAMPLERS)
    rundir = out / f"{target}-{seed}-{'on' if attribution else 'off'}"
    config = scenario_config(load_scenario("radix-steady"), rundir, duration_s=duration_s,
                             seed=seed, target=BY_NAME[target].spec, samplers=samplers)
    began = time.monotonic()
    outcome = run(config)
    wall = time.monotonic() - began
    metrics = metrics_json(outcome.summary)
    judged = {s: judged_metric(metrics, s) for s in SIGNALS}
    ops = metrics.get("ops_per_s", {}).get("value")
    return {"verdict": outcome.verdict, "wall_s": wall, "ops_per_s": ops,
            **{s: m[0] for s, m in judged.items()},
            "leaking": [s for s, m in judged.items() if m[1] == "leak"]}


def judged_metric(metrics: dict[str, Any], signal: str) -> tuple[float | None, str | None]:
    """The growth the budget on ``signal`` was judged on (the metric with a status), and
    that status."""
    for name, metric in metrics.items():
        if name.startswith(f"{signal}_") and name.endswith("growth") and metric.get("status"):
            value = metric.get("value")
            rate = float(value) if isinstance(value, int | float) else None
            return rate, str(metric["status"])
    return None, None


def ratio(on: float | None, off: float | None) -> float | None:
    return on / off if on is not None and off not in (None, 0.0) else None


def rate_row(target: str, signal: str, on: list[float], off: list[float]) -> list[str]:
    """Median on / off with their ratio, the worst pair's ratio, and how far apart the
    off runs' own rates lie (max / min - 1)."""
    bias = statistics.median(on) / statistics.median(off)
    pairs = [a / b for a, b in zip(on, off, strict=True)]
    worst = max(pairs, key=lambda r: abs(r - 1))
    spread = max(off) / min(off) - 1 if min(off) > 0 else float("nan")
    return [target, signal, f"{shown(statistics.median(on))} / {shown(statistics.median(off))} "
            f"({bias:.3f}x)", f"{worst:.3f}x", f"{spread:+.1%}"]


def shown(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("-k", dest="select", default=",".join(TARGETS))
    args = parser.parse_args(argv)
    targets = [t for t in args.select.split(",") if t]
    rec = Record("attribution_cost", "Attribution cost", {
        "seeds": args.seeds, "duration_s": args.duration, "targets": " ".join(targets)})
    importable_here()
    rows, walls = [], []
    rates: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-attribution-") as tmp:
        for target in targets:
            for seed in range(args.seeds):
                on = one_run(target, seed, args.duration, True, Path(tmp))
                off = one_run(target, seed, args.duration, False, Path(tmp))
                wall = on["wall_s"] / off["wall_s"] - 1
                walls.append(wall)
                cells = [target, str(seed), f"{on['verdict']} / {off['verdict']}"]
                for signal in SIGNALS:
                    r = ratio(on[signal], off[signal])
                    if r is not None and signal in off["leaking"]:  # only a leak's judged rate
                        pair = rates.setdefault((target, signal), ([], []))
                        pair[0].append(on[signal])
                        pair[1].append(off[signal])
                    cells.append(f"{shown(on[signal])} / {shown(off[signal])} ({shown(r)}x)")
                cells += [f"{shown(on['ops_per_s'])} / {shown(off['ops_per_s'])}",
                          f"{on['wall_s']:.1f} / {off['wall_s']:.1f} s ({wall:+.1%})"]
                rows.append(cells)
                print("  " + "  ".join(cells), flush=True)
    rec.say("radix-steady, each zoo target: attribution on / off, same seed; rates per hour "
            "as judged (heap in B/h, py_blocks in blocks/h); ops/s of the measured window; "
            "wall time of the whole run.")
    rec.table(["target", "seed", "verdict on / off", "heap on / off", "py_blocks on / off",
               "ops/s on / off", "wall on / off"], rows)
    # Only the rates that judged a leak: near-zero slopes of the others give any ratio.
    rec.table(["target", "signal", "median on / median off", "worst pair", "off runs' spread"],
              [rate_row(target, signal, on, off) for (target, signal), (on, off) in rates.items()])
    biases = [abs(statistics.median(on) / statistics.median(off) - 1)
              for on, off in rates.values()]
    worst = max(biases, default=None)
    rec.target("judged leak rates with attribution on within 5% of off (medians over seeds)",
               worst is not None and worst <= 0.05,
               f"worst {worst:.1%}" if worst is not None else "no rates",
               why="the windows' samples are bridged out of the judged series, not re-measured")
    median_wall = statistics.median(walls) if walls else None
    rec.target("wall time with attribution at most 10% longer",
               median_wall is not None and median_wall <= 0.10,
               f"median {median_wall:+.1%}, worst {max(walls):+.1%}" if walls else "no runs",
               why="the owner search at the end of a run and the tracemalloc windows")
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
