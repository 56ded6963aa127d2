"""``leak-harness report``: HTML and plots from result files; merges shards."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.suite_out import finish_suite
from harness.errors import UsageError

SUMMARY = "summary.json"


def find_rundirs(paths: list[Path]) -> list[Path]:
    """Run folders (those holding summary.json) at or below each path."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path} does not exist.")
        if (path / SUMMARY).exists():
            found.append(path)
        else:
            found.extend(sorted(p.parent for p in path.rglob(SUMMARY)))
    if not found:
        raise UsageError(f"no run folder (with {SUMMARY}) under {', '.join(map(str, paths))}.")
    return found


class ReportCommand:
    """Write the HTML report and plots of a run folder; given suite folders (several
    shards of a 'check' or nightly run), merge them into one index.html, junit.xml
    and history.

    examples:
      leak-harness report results/runs/mamba-lru-20261130-101500
      leak-harness report shard-1/ shard-2/ --out results/merged --history results/history.sqlite
    """

    name = "report"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                            help="a run folder, or folders holding run folders")
        parser.add_argument("--out", type=Path, help="where the merged suite report goes")
        parser.add_argument("--history", type=Path, help="append the runs to this database")

    def run(self, args: argparse.Namespace) -> int:
        from reports.run_report import write_run_report

        rundirs = find_rundirs(args.paths)
        if len(rundirs) == 1 and args.out is None and args.history is None:
            print(f"report: {write_run_report(rundirs[0])}")
            return 0
        out = args.out or (args.paths[0] if len(args.paths) == 1 else Path("results/merged"))
        return finish_suite(rundirs, out, args.history)


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
            if not (path / SUMMARY).exists():
                raise UsageError(f"{path} is not a run folder (no {SUMMARY}).")
        comparison = write_comparison(args.a, args.b, args.out)
        print(comparison.sentence)
        print(f"comparison: {comparison.html}")
        return 0
