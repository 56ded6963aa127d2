"""``leak-harness report``: HTML and plots from result files; merges shards."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UsageError
from harness.parent.runner import reanalyse
from harness.runfiles.names import SAMPLES_FILE, SUMMARY_FILE
from harness.runfiles.reader import open_run
from harness.runfiles.shard_plan import find_plans, night_of
from harness.runfiles.summary import unreadable_summary
from leak_harness.cli.base import write_report
from leak_harness.cli.suite_out import finish_suite


def find_rundirs(paths: list[Path], planned: bool = False) -> list[Path]:
    """Run folders (those holding summary.json or samples.jsonl) at or below each path;
    none is refused unless ``planned`` (a shard's plan was found: what is missing is
    then said cell by cell).

    A folder with samples but no summary (its run was killed, or could not
    write) is analysed again here and gets its summary."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path} does not exist.")
        here = [path] if (path / SAMPLES_FILE).exists() or (path / SUMMARY_FILE).exists() else \
            sorted({p.parent for name in (SAMPLES_FILE, SUMMARY_FILE) for p in path.rglob(name)})
        found.extend(here)
    if not found and not planned:
        raise UsageError(f"no run folder (with {SUMMARY_FILE} or {SAMPLES_FILE}) under "
                         f"{', '.join(map(str, paths))}.")
    for rundir in found:
        if not (rundir / SUMMARY_FILE).exists():
            outcome = reanalyse(rundir)
            print(f"{rundir}: no summary; analysed the samples again: {outcome.verdict}")
        elif (rundir / SAMPLES_FILE).exists() and (why := unreadable_summary(rundir)):
            kept = set_aside(rundir / SUMMARY_FILE)
            outcome = reanalyse(rundir)
            print(f"{rundir}: its summary is not valid JSON ({why}; kept as {kept.name}); "
                  f"analysed the samples again: {outcome.verdict}")
    return found


def set_aside(path: Path) -> Path:
    """Rename an unreadable file out of the way, never over an earlier one."""
    target, n = path.with_name(path.name + ".unreadable"), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.unreadable-{n}")
    path.rename(target)
    return target


class ReportCommand:
    """Write the HTML report and plots of a run folder; given suite folders (several
    shards of a 'check' or nightly run), merge them into one index.html, junit.xml
    and history. Shards of 'check --shard' left their plan: a shard or a cell
    missing from the merge is named and fails it, as does a history it could not
    write.

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
        # Shards record what the night planned (check --shard): a merge names what is
        # missing of it and fails, instead of merging what is there as the whole night.
        night = night_of(find_plans(args.paths))
        rundirs = find_rundirs(args.paths, planned=night is not None)
        if args.reanalyse:
            for rundir in rundirs:
                print(f"{rundir}: judged again: {reanalyse(rundir).verdict}")
        if len(rundirs) == 1 and args.out is None and args.history is None and night is None:
            print(f"report: {write_report(open_run(rundirs[0]))}")
            return 0
        out = args.out or (args.paths[0] if len(args.paths) == 1 else Path("results/merged"))
        # The merge's history is the night's record: one it could not write fails it.
        return finish_suite(rundirs, out, args.history, night=night,
                            history_required=args.history is not None)
