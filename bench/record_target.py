"""The program ``bench/record_overhead.py`` records: a steady CPU-bound loop, timed by itself.

Each operation builds a request-like dict, serialises it and keeps the last
few hundred in a bounded queue: the same work every time, so ops per CPU
second moves only with what else takes the process's CPU (the recorder's
thread). A cache scenario's workload would not do: its pace changes with its
own eviction phases by more than the cost being measured. Prints one JSON
line at the end: ops per CPU second and per wall second after ``--skip`` s.
"""

from __future__ import annotations

import argparse
import collections
import json
import time


def operation(n: int, kept: collections.deque[str]) -> None:
    request = {"id": n, "tokens": list(range(n % 64, n % 64 + 48)), "user": f"u{n % 97}"}
    kept.append(json.dumps(request))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--skip", type=float, default=4.0)
    args = parser.parse_args()
    kept: collections.deque[str] = collections.deque(maxlen=512)
    began = time.monotonic()
    n = counted = 0
    wall0 = cpu0 = 0.0
    while (now := time.monotonic()) - began < args.duration:
        for _ in range(100):
            operation(n, kept)
            n += 1
        if now - began >= args.skip:
            if not wall0:
                wall0, cpu0 = now, time.process_time()
            counted += 100
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    print(json.dumps({"ops": counted, "ops_per_wall_s": counted / wall,
                      "ops_per_cpu_s": counted / cpu}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
