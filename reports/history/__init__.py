"""The history of nightly suites: append, read trends, flag regressions, plot.

One import for callers (the CLI's ``history`` command, ``make nightly``); the
pieces live in :mod:`reports.history.db` (SQLite, safe with concurrent
writers), :mod:`reports.history.flags` (the noise-band rule and its false
positives) and :mod:`reports.history.plots` (one trend plot per scenario).
"""

from __future__ import annotations

from reports.history.db import (
    DEFAULT_DB,
    Appended,
    Point,
    Trend,
    append_suite,
    trends,
)
from reports.history.flags import Band, Flag, check_latest, flag_regressions, noise_band
from reports.history.plots import write_trend_plots

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
