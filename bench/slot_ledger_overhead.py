"""What the slot ledger (``scenarios/workloads/slots.py``) costs the scheduler: CPU time
per step with the ledger wrapping the allocators vs without, in this process.

For each scenario's cache and load, ``--pairs`` pairs of runs of ``--steps`` scheduler
steps on the same seed, interleaved A B B A so drift cancels; "off" removes the
wrappers the ledger put on the allocator instances (the class's methods show through)
and the ledger itself. The cost is ``on / off - 1`` of CPU seconds per pair: median,
min and max. Target: within 3% (the sampler overhead's rule).

    python bench/slot_ledger_overhead.py [--pairs 4] [--steps 3000] [--scenarios a,b]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from harness.api import RunContext
from harness.registry import load_scenario
from scenarios.workloads.scheduler import Scheduler

SCENARIOS = ("radix-overlap", "mamba-exits", "mamba-pressure", "radix-steady")


def build(name: str, ledger: bool) -> Scheduler:
    """The scenario's own scheduler over its own cache; ``ledger`` False takes the
    ledger's wrappers off the allocator instances."""
    workload: Any = load_scenario(name).build(RunContext(seed=0))
    s: Scheduler = workload.scheduler
    if not ledger and s.idle_check.slots is not None:
        for allocator in s.cache.pool_allocators().values():  # type: ignore[attr-defined]
            for method in ("alloc", "free"):
                allocator.__dict__.pop(method, None)
        s.idle_check.slots = None
    return s


def cpu_per_step(name: str, ledger: bool, steps: int) -> float:
    s = build(name, ledger)
    began = time.process_time()
    for _ in range(steps):
        s.step()
    return (time.process_time() - began) / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    print(f"slot ledger overhead: CPU per scheduler step, on vs off, {args.pairs} pairs of "
          f"{args.steps} steps")
    for name in args.scenarios.split(","):
        costs = []
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            took = {on: cpu_per_step(name, on, args.steps) for on in order}
            costs.append(took[True] / took[False] - 1)
        print(f"  {name:16s} median {statistics.median(costs):+.1%}  "
              f"min {min(costs):+.1%}  max {max(costs):+.1%}  "
              f"({took[False] * 1e6:.0f} us/step off)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
