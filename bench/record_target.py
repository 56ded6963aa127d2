"""The program ``bench/record_overhead.py`` records: radix-steady's workload, timed by itself.

Prints one JSON line at the end: ops per CPU second and per wall second of this
process over the run after ``--skip`` seconds (start-up and warm-up left out).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.api import RunContext
from harness.registry import load_scenario


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--skip", type=float, default=4.0)
    args = parser.parse_args()
    workload = load_scenario("radix-steady").build(RunContext(seed=0))
    began = time.monotonic()
    counted, wall0, cpu0 = 0, 0.0, 0.0
    while (now := time.monotonic()) - began < args.duration:
        ops = workload.step()
        if now - began >= args.skip:
            if not wall0:
                wall0, cpu0 = now, time.process_time()
            counted += ops
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    workload.close()
    print(json.dumps({"ops": counted, "ops_per_wall_s": counted / wall,
                      "ops_per_cpu_s": counted / cpu}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
