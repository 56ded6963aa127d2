"""Seconds of samples lead with what grew, not an hourly extrapolation; counts are grouped.

A rate per hour from a short judged window ("rss +564 GB/h") reads as an alarm the run
never measured: where the window is short, the index cell, the plot badge and the
terminal lead with the amount over it ("+14.9 MB in 1.62s"), the rate follows. Large
counts print with thousands separators everywhere, as the tables print them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runfiles.summary import load_summary
from harness.units import format_rate, grouped
from leak_harness.cli.run import reasons_amount_first
from reports.render.judged import SHORT_WINDOW_S, convicting_signal, judged_budgets
from tests.reports.synth import write_run

MB = 1e6


@pytest.mark.parametrize(("value", "unit", "text"), [
    (352e6, "/h", "352,000,000 /h"),
    (-3.48e8, "/h", "-348,000,000 /h"),
    (12345.6, "/kop", "12,300 /kop"),
    (4920.0, "", "4,920"),
    (120.0, "/h", "120 /h"),
    (0.5, "/kop", "0.5 /kop"),
    (3.7e9, "B/h", "3.7 GB/h"),
])
def test_counts_are_grouped_by_thousands_and_bytes_keep_their_prefix(
    value: float, unit: str, text: str,
) -> None:
    assert format_rate(value, unit) == text


def test_grouping_leaves_what_is_not_a_plain_number() -> None:
    assert grouped("1520000.5") == "1,520,000.5"
    assert grouped("inf") == "inf" and grouped("–") == "–"


@pytest.mark.parametrize(("duration_s", "amount_leads"), [(120.0, True), (2400.0, False)])
def test_a_short_window_leads_with_its_amount_a_long_one_with_its_rate(
    tmp_path: Path, duration_s: float, amount_leads: bool,
) -> None:
    rundir = write_run(tmp_path / "run", "demo-cache", ["demo-unlink"],
                       growth_per_h=4000 * MB, duration_s=duration_s)
    summary = load_summary(rundir)
    rss = next(j for j in judged_budgets(summary) if j.series == "rss")
    assert rss.failing and rss.window_s is not None
    assert (rss.window_s < SHORT_WINDOW_S) == amount_leads
    cell = convicting_signal(summary)
    lines = reasons_amount_first(summary)
    rss_line = next(line for line in lines if "rss growth" in line)
    if amount_leads:
        assert cell.startswith(f"rss {rss.amount()} (+")
        assert rss_line == f"{rss.amount()}: {rss.reason}"
    else:
        assert cell.startswith("rss +") and rss.amount() not in cell
        assert rss_line == rss.reason
    # A reason that held, or that is no budget's, is printed as it is.
    assert [line.partition(": ")[2] if line not in summary.reasons else line
            for line in lines] == summary.reasons
