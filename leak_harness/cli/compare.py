"""``leak-harness compare``: two runs on shared axes, with the ratio of their growth."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.names import SUMMARY_FILE
from harness.runfiles.reader import open_run


class CompareCommand:
    """Put two runs on shared axes (for example broken vs fixed) and give the ratio
    of their growth rates.

    example:
      leak-harness compare results/check/mamba-lru/inject-mamba-lru-unlink \\
          results/check/mamba-lru/fixed --out results/compare
    """

    name = "compare"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("a", type=Path, help="first run folder (e.g. the broken run)")
        parser.add_argument("b", type=Path, help="second run folder (e.g. the fixed run)")
        parser.add_argument("--out", type=Path, default=Path("results/compare"),
                            help="folder for compare.png and compare.html")

    def run(self, args: argparse.Namespace) -> int:
        from reports.compare import write_comparison

        for path in (args.a, args.b):
            if not (path / SUMMARY_FILE).exists():
                raise UsageError(f"{path} is not a run folder (no {SUMMARY_FILE}).")
        comparison = write_comparison(open_run(args.a), open_run(args.b), args.out)
        print(comparison.sentence)
        print(f"comparison: {comparison.html}")
        return 0
