"""The history of nightly suites: one row per run, and the rule that flags a regression.

Storage and rule live together here, below the faces, so a face's exit code
comes from the harness: :mod:`~harness.history.db` (SQLite, safe with
concurrent writers) and :mod:`~harness.history.flags` (the noise-band rule and
its false positives). Trend plots and the flags' sentences are the reports'
(:mod:`reports.history`).
"""

from __future__ import annotations

from harness.history.db import (
    DEFAULT_DB,
    Appended,
    BudgetPoint,
    Point,
    Trend,
    append_runs,
    append_suite,
    trends,
)
from harness.history.flags import (
    Band,
    Flag,
    check_latest,
    flag_regressions,
    noise_band,
    regressions,
)

__all__ = [
    "DEFAULT_DB",
    "Appended",
    "Band",
    "BudgetPoint",
    "Flag",
    "Point",
    "Trend",
    "append_runs",
    "append_suite",
    "check_latest",
    "flag_regressions",
    "noise_band",
    "regressions",
    "trends",
]
