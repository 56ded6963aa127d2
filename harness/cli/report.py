"""``leak-harness report``: HTML and plots from result files; merges shards."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.suite_out import finish_suite
from harness.errors import UsageError
from harness.runfiles.names import SUMMARY_FILE


def find_rundirs(paths: list[Path]) -> list[Path]:
    """Run folders (those holding summary.json) at or below each path."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path} does not exist.")
        if (path / SUMMARY_FILE).exists():
            found.append(path)
        else:
            found.extend(sorted(p.parent for p in path.rglob(SUMMARY_FILE)))
    if not found:
        raise UsageError(f"no run folder (with {SUMMARY_FILE}) under {', '.join(map(str, paths))}.")
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
        from reports.run import write_run_report

        rundirs = find_rundirs(args.paths)
        if len(rundirs) == 1 and args.out is None and args.history is None:
            print(f"report: {write_run_report(rundirs[0])}")
            return 0
        out = args.out or (args.paths[0] if len(args.paths) == 1 else Path("results/merged"))
        return finish_suite(rundirs, out, args.history)
