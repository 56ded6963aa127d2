"""``leak-harness doctor``: is a user's cache ready for the scenarios?"""

from __future__ import annotations

import argparse
from typing import Any

from harness.api import load_callable
from harness.errors import UsageError
from harness.registry import load_scenario, scenario_names
from harness.verdicts import EXIT_PASS, EXIT_REGRESSION
from leak_harness.cli.base import check_target_spec

# The checks know the cache protocol, which is the scenarios' (the harness does not
# import that package): loaded by name, the way scenario modules are.
DIAGNOSE = "scenarios.workloads.conformance:diagnose"


class DoctorCommand:
    """Build your cache through its factory under each scenario, drive it for a few
    seconds and list at once every problem: missing or failing protocol methods,
    stats() that are not numbers, books that do not balance at idle, locks held with
    nothing running. Also says which gauges it publishes, which budgets will judge
    and which are skipped, and its ops/s. Exit 0 when it conforms, 1 when it does not
    (a --target that cannot be loaded is one of its problems; 2 is a bad argument).

    examples:
      leak-harness doctor --target examples.own_cache:make
      leak-harness doctor --target mypkg.cache:make radix-steady mamba-lru
    """

    name = "doctor"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                            help="scenarios to try (default: all)")
        parser.add_argument("--target", required=True, help="cache factory module:callable")
        parser.add_argument("--seconds", type=float, default=2.0,
                            help="seconds of workload per scenario (default 2)")

    def run(self, args: argparse.Namespace) -> int:
        check_target_spec(args.target)
        if not args.seconds > 0:
            raise UsageError("--seconds must be positive.")
        names = args.scenarios or scenario_names()
        for name in names:
            load_scenario(name)  # an unknown name is refused before anything runs
        diagnose = load_callable(DIAGNOSE)
        problems = 0
        print(f"doctor: {args.target}")
        for name in names:
            found: Any = diagnose(name, args.target, args.seconds)
            problems += len(found.problems)
            print(f"{name}: {'ok' if found.ok else f'{len(found.problems)} problem(s)'}")
            for problem in found.problems:
                print(f"  PROBLEM: {problem}")
            for fact in found.facts:
                print(f"  - {fact}")
        print("conforms: every scenario ran." if not problems
              else f"{problems} problem(s): fix them, then run the scenarios.")
        return EXIT_PASS if not problems else EXIT_REGRESSION
