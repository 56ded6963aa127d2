"""``leak-harness report``: HTML and plots from result files; merges shards."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UsageError
from harness.parent.runner import reanalyse
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.reader import open_run
from leak_harness.cli.base import write_report
from leak_harness.cli.suite_out import finish_suite


def find_rundirs(paths: list[Path]) -> list[Path]:
    """Run folders (those holding summary.json or samples.jsonl) at or below each path.

    A folder with samples but no summary (its run was killed, or could not
    write) is analysed again here and gets its summary."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path} does not exist.")
        here = [path] if (path / SAMPLES_FILE).exists() or (path / SUMMARY_FILE).exists() else \
            sorted({p.parent for name in (SAMPLES_FILE, SUMMARY_FILE) for p in path.rglob(name)})
        found.extend(here)
    if not found:
        raise UsageError(f"no run folder (with {SUMMARY_FILE} or {SAMPLES_FILE}) under "
                         f"{', '.join(map(str, paths))}.")
    for rundir in found:
        if not (rundir / SUMMARY_FILE).exists():
            outcome = reanalyse(rundir)
            print(f"{rundir}: no summary; analysed the samples again: {outcome.verdict}")
    return found


class ReportCommand:
    """Write the HTML report and plots of a run folder; given suite folders (several
    shards of a 'check' or nightly run), merge them into one index.html, junit.xml
    and history.

    examples:
      leak-harness report results/runs/mamba-lru-20261130-101500
      leak-harness report shard-1/ shard-2/ --out results/merged --history results/history.sqlite
      leak-harness report --reanalyse results/runs/mamba-lru-20261130-101500
    """

    name = "report"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                            help="a run folder, or folders holding run folders")
        parser.add_argument("--out", type=Path, help="where the merged suite report goes")
        parser.add_argument("--history", type=Path, help="append the runs to this database")
        parser.add_argument("--reanalyse", action="store_true",
                            help="judge each run again with this version's analysis, from its "
                                 "samples, and rewrite its summary.json (an older summary is "
                                 "otherwise shown as it was judged)")

    def run(self, args: argparse.Namespace) -> int:
        rundirs = find_rundirs(args.paths)
        if args.reanalyse:
            for rundir in rundirs:
                print(f"{rundir}: judged again: {reanalyse(rundir).verdict}")
        if len(rundirs) == 1 and args.out is None and args.history is None:
            print(f"report: {write_report(open_run(rundirs[0]))}")
            return 0
        out = args.out or (args.paths[0] if len(args.paths) == 1 else Path("results/merged"))
        return finish_suite(rundirs, out, args.history)
