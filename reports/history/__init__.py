"""The history of nightly suites: append, read trends, flag regressions, plot.

One import for callers (the CLI's ``history`` command, ``make nightly``); the
pieces live in :mod:`reports.history_db` (SQLite, safe with concurrent
writers), :mod:`reports.history_flags` (the noise-band rule and its false
positives) and :mod:`reports.history_plots` (one trend plot per scenario).
"""

from __future__ import annotations

from reports.history_db import (
    DEFAULT_DB,
    Appended,
    Point,
    Trend,
    append_suite,
    trends,
)
from reports.history_flags import Band, Flag, check_latest, flag_regressions, noise_band
from reports.history_plots import write_trend_plots

__all__ = [
    "DEFAULT_DB",
    "Appended",
    "Band",
    "Flag",
    "Point",
    "Trend",
    "append_suite",
    "check_latest",
    "flag_regressions",
    "noise_band",
    "trends",
    "write_trend_plots",
]
