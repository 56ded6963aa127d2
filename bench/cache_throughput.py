"""Reference-cache throughput: operations per second of a prefix-sharing churn.

The reference cache is the harness's load generator, so its speed bounds how
fast a leak shows. For each cache class this drives the same scheduler and
traffic as the scenarios (fixed seed, no samplers, GC as default) for a fixed
wall time and prints cache operations per second. PP caches run with their
real gloo peer rank.

    python bench/cache_throughput.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.record import Record
from harness.api import RunContext
from harness.registry import load_scenario

CASES = [
    ("RadixCache", "radix-steady"),
    ("MambaRadixCache", "mamba-lru"),
    ("SWARadixCache", "swa-lru"),
    ("UnifiedRadixCache", "unified-lru"),
    ("HiMambaRadixCache", "himamba-stale-leaf"),
    ("HiRadixCache (PP=2)", "hiradix-pp-sync"),
    ("UnifiedRadixCache (PP=2)", "unified-pp-sync"),
]


def measure(scenario_name: str, seconds: float) -> tuple[float, int]:
    """Cache operations per second and steps run, over ``seconds`` of wall time."""
    scenario = load_scenario(scenario_name)
    workload = scenario.build(RunContext(seed=0))
    try:
        ops, steps, start = 0, 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            ops += workload.step()
            steps += 1
        return ops / (time.perf_counter() - start), steps
    finally:
        workload.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="wall time per cache class")
    args = parser.parse_args()
    rec = Record("cache_throughput", "Reference cache throughput", {"seconds": args.seconds})
    rows = []
    for label, name in CASES:
        rate, steps = measure(name, args.seconds)
        rec.figures[label] = {"scenario": name, "ops_per_s": rate, "steps": steps}
        rows.append([label, name, f"{rate:.0f}", steps])
        print(f"  {label}: {rate:.0f} ops/s", flush=True)
    rec.say("Cache operations per second of each scenario's workload, no samplers, seed 0, "
            f"{args.seconds:g} s each: the load generator's ceiling.")
    rec.table(["cache class", "scenario", "ops/s", "steps"], rows)
    rec.publish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
