"""A scenario's workload as a plain program: the worker's loop without the worker.

    python -m scenarios.workloads.plain radix-steady --duration 20
    leak-harness record --duration 25s -- -m scenarios.workloads.plain mamba-lru \\
        --inject mamba-lru-unlink

It builds the workload as the worker does and steps it until ``--duration``
or SIGINT, telling a recorder (``leak-harness record``) what a worker would
know: the work done (``harness.record.ops``), the workload's gauges
(``harness.record.gauge``) and the scenario, whose calibrated healthy growth
then applies. Recording it with the scenario's budgets gives the verdicts
``leak-harness run`` gives on the same scenario.
"""

from __future__ import annotations

import argparse
import functools
import gc
import signal
import threading
import time

from harness import record
from harness.api import RunContext
from harness.registry import load_scenario

GAUGE_EVERY_S = 0.25  # gauges refreshed between steps this often (the recorder reads at 2 Hz)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--duration", type=float, default=None, help="seconds (default: until "
                                                                       "SIGINT)")
    parser.add_argument("--inject", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    workload = scenario.build(RunContext(seed=args.seed, inject=tuple(args.inject)))
    gc.collect()  # as the worker does: the build's garbage is not the workload's
    record.ready()
    record.scenario(scenario.name)
    # Gauges are read between steps, as the worker reads them: the recorder's thread
    # would otherwise catch a step halfway (a node unlinked, not yet dropped).
    gauges = dict(workload.gauges())
    readings = {name: reading() for name, reading in gauges.items()}
    for name in gauges:
        record.gauge(name, functools.partial(readings.__getitem__, name))
    # SIGINT (how a recorder stops a program) ends the loop between two steps, as
    # the worker's stop request does: a step cut halfway would leave the cache's
    # books half-updated and its close() would rightly fail.
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    began = last = time.monotonic()
    try:
        while not stop.is_set() and (args.duration is None or
                                     time.monotonic() - began < args.duration):
            record.ops(workload.step())
            if time.monotonic() - last >= GAUGE_EVERY_S:
                readings.update((name, reading()) for name, reading in gauges.items())
                last = time.monotonic()
    finally:
        workload.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
