"""``leak-harness list``: the scenarios and the regressions they catch."""

from __future__ import annotations

import argparse

from harness.registry import list_scenarios


class ListCommand:
    """List the scenarios with their descriptions and the regressions they catch.

    example:
      leak-harness list
    """

    name = "list"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        listings = list_scenarios()
        if not listings:
            print("no scenarios found in the 'scenarios' package.")
        for item in listings:
            if item.scenario is None:
                print(f"{item.name}\n    cannot be loaded: {item.error}")
                continue
            regressions = ", ".join(item.scenario.regressions) or "none"
            print(f"{item.name}\n    {item.scenario.description}\n    regressions: {regressions}")
        return 0
