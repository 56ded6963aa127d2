"""``leak-harness history``: trends per scenario across nightly runs."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from harness.errors import UsageError
from harness.history import Trend, regressions, trends
from harness.units import format_rate


def trend_line(trend: Trend) -> str:
    """``mamba-lru[fixed]: 14 runs, latest pass (...), growth 1.2 MB/h; pass x14``, and the
    budgets the latest run failed, with their values (a leak convicted on garbage shows
    there, not as RSS growth)."""
    latest = trend.points[-1]
    growth = "n/a" if latest.growth_per_h is None else format_rate(latest.growth_per_h, "B/h")
    verdicts = Counter(p.verdict for p in trend.points)
    tally = ", ".join(f"{v} x{n}" for v, n in verdicts.most_common())
    failed = [f"{b.series} {format_rate(b.value, b.unit)} against {b.budget!r}"
              for b in latest.budgets if b.status in ("leak", "suspicious") and b.value is not None]
    by = f"; latest failed on {', '.join(failed)}" if failed else ""
    return (f"{trend.scenario}[{trend.column}]: {len(trend.points)} runs, latest "
            f"{latest.verdict} ({latest.recorded_at:%Y-%m-%d %H:%M}), growth {growth}; "
            f"{tally}{by}")


class HistoryCommand:
    """Print each scenario's recent growth per hour and flag a scenario whose latest
    growth left the band of its own run-to-run noise (exit 1 when one is flagged);
    with --plots, also draw one trend plot per scenario into that folder.

    example:
      leak-harness history --db results/history.sqlite --nights 30 --plots results/trends
    """

    name = "history"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--db", type=Path, default=Path("results/history.sqlite"),
                            help="history database (default results/history.sqlite)")
        parser.add_argument("--scenario", help="only this scenario")
        parser.add_argument("--nights", type=int, default=14, help="recent runs to show (14)")
        parser.add_argument("--plots", type=Path, default=None,
                            help="draw the trend plots into this folder (default: none)")

    def run(self, args: argparse.Namespace) -> int:
        from reports.history import flag_sentence, write_trend_plots

        if args.nights < 1:
            raise UsageError("--nights must be at least 1.")
        if not args.db.exists():
            raise UsageError(f"no history at {args.db}: run 'leak-harness check' first.")
        for trend in trends(args.db, args.scenario, args.nights):
            print(trend_line(trend))
        if args.plots is not None:  # reading the history writes nothing unless asked
            plots = write_trend_plots(args.db, args.plots, args.nights)
            print(f"{len(plots)} trend plots in {args.plots}")
        flags = regressions(args.db, args.scenario)
        for flag in flags:
            print(f"REGRESSION: {flag_sentence(flag)}")
        return 1 if flags else 0
