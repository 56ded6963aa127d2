"""``leak-harness doctor``: is a user's cache ready for the scenarios?"""

from __future__ import annotations

import argparse
from typing import Any

from harness.api import load_callable
from harness.errors import UsageError
from harness.registry import load_scenario, scenario_names
from harness.verdicts import EXIT_PASS, EXIT_REGRESSION
from leak_harness.cli.base import check_target_spec, target_import_hint

# The checks know the cache protocol, which is the scenarios' (the harness does not
# import that package): loaded by name, the way scenario modules are.
DIAGNOSE = "scenarios.workloads.conformance:diagnose"


class DoctorCommand:
    """Build your cache through its factory under each scenario, drive it for a few
    seconds and list at once every problem: missing or failing protocol methods,
    stats() that are not numbers, books that do not balance at idle, locks held with
    nothing running. One line per scenario: ok, its problems, or "not exercised" when
    the cache cannot take what the scenario is for (none of its exit paths, or no
    overlap scheduling); --verbose adds the gauges it publishes, the budgets that will
    judge and those skipped, and its exit-path calls. Exit 0 when it conforms, 1 when
    it does not (a --target that cannot be loaded is one of its problems; 2 is a bad
    argument).

    examples:
      leak-harness doctor --target examples.own_cache:make
      leak-harness doctor --target mypkg.cache:make radix-steady mamba-lru --verbose
    """

    name = "doctor"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                            help="scenarios to try (default: all)")
        parser.add_argument("--target", required=True, help="cache factory module:callable")
        parser.add_argument("--seconds", type=float, default=2.0,
                            help="seconds of workload per scenario (default 2)")
        parser.add_argument("-v", "--verbose", action="store_true",
                            help="under each scenario, what a run will see: gauges, budgets "
                                 "that judge and those skipped, exit-path and overlap calls")

    def run(self, args: argparse.Namespace) -> int:
        check_target_spec(args.target)
        if not args.seconds > 0:
            raise UsageError("--seconds must be positive.")
        names = args.scenarios or scenario_names()
        for name in names:
            load_scenario(name)  # an unknown name is refused before anything runs
        try:  # a target that does not import fails every scenario alike: said once
            factory = load_callable(args.target)
        except Exception as exc:
            print(f"doctor: {args.target}\n  PROBLEM: cannot load: {type(exc).__name__}: "
                  f"{exc}.{target_import_hint(exc, args.target)}\n"
                  "1 problem(s): fix it, then run the scenarios.")
            return EXIT_REGRESSION
        diagnose = load_callable(DIAGNOSE)
        problems, width = 0, max(len(name) for name in names)
        not_exercised: list[str] = []
        print(f"doctor: {args.target} ({args.seconds:g} s of workload per scenario"
              f"{'' if args.verbose else '; --verbose for what each run will see'})")
        describe, declines = (getattr(factory, key, None) for key in ("describe", "declines"))
        if callable(describe):  # a built-in target says which code it runs (a release)
            print(f"  {describe()}")
        declined = 0
        for name in names:
            why = declines(load_scenario(name).cache_options) if callable(declines) else None
            if why:  # what check marks n/a: not a problem of the cache
                declined += 1
                print(f"{name:<{width}}  n/a: {why}")
                continue
            found: Any = diagnose(name, args.target, args.seconds)
            problems += len(found.problems)
            if found.ok and not found.exercised:
                not_exercised.append(name)
            print(f"{name:<{width}}  {headline(found)}")
            for problem in found.problems:
                print(f"  PROBLEM: {problem}")
            if args.verbose:
                for fact in found.facts:
                    print(f"  - {fact}")
        if problems:
            print(f"{problems} problem(s): fix them, then run the scenarios.")
        elif not_exercised:
            one = len(not_exercised) == 1
            print(f"conforms, but {len(not_exercised)} of {len(names)} scenarios "
                  f"{'is' if one else 'are'} not exercised on this cache: "
                  f"{', '.join(not_exercised)} (a pass there says nothing of the paths "
                  f"{'it is' if one else 'they are'} for).")
        else:
            ran = len(names) - declined
            print(f"conforms: all {ran} scenarios ran" + (f" ({declined} n/a for this target)."
                                                          if declined else "."))
        return EXIT_PASS if not problems else EXIT_REGRESSION


def headline(found: Any) -> str:
    """One scenario in a line: its problems, 'not exercised' and why, or ok (with what
    it skips of what it is for, and its ops/s)."""
    if found.problems:
        return f"{len(found.problems)} problem(s)"
    skipped: dict[str, str] = found.skipped_paths
    why = "; ".join(sorted(set(skipped.values())))
    if found.overlap_off is not None:
        return f"NOT EXERCISED: overlap scheduling is off ({found.overlap_off})"
    if found.sessions_off is not None:
        return f"NOT EXERCISED: streaming sessions are off ({found.sessions_off})"
    if getattr(found, "disagg_off", None) is not None:
        return f"NOT EXERCISED: disaggregated prefill and decode is off ({found.disagg_off})"
    speculation_off = getattr(found, "speculation_off", None)
    if speculation_off is not None:
        return f"NOT EXERCISED: speculative decoding is off ({speculation_off})"
    if not found.exercised:
        return (f"NOT EXERCISED: none of its {found.exit_paths} exit paths is taken ({why})")
    rate = "" if found.ops_per_s is None else f", {found.ops_per_s:,.0f} ops/s"
    if skipped:
        return (f"ok{rate}; {len(skipped)} of {found.exit_paths} exit paths not taken "
                f"({', '.join(sorted(skipped))}: {why})")
    return f"ok{rate}"
