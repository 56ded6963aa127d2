"""What suite, history and compare read from a ``summary.json``: pure lookups.

Here, beside the summary, so the history (:mod:`harness.history`) stores the
same numbers the reports quote.

A summary lists several growth metrics per series (``rss_growth``,
``rss_floor_growth``, ``rss_tail_growth``, ...; see
:mod:`harness.analysis.metrics`). The one to quote is the one its budget was
judged on, which is the one carrying a ``status``; without a budget on the
series, the plain ``<series>_growth``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.runfiles.summary import Summary
from harness.runfiles.summary_records import Metric
from harness.verdicts import PROCESS_VERDICTS

FIXED = "fixed"


@dataclass(frozen=True)
class Growth:
    """A growth metric of one run: per hour in ``unit`` (``B/h`` for rss), 95% interval."""

    name: str
    per_h: float
    ci: tuple[float, float] | None
    unit: str
    status: str | None = None  # the budget's judgement of it (pass, suspicious, leak)

    @property
    def confirmed(self) -> bool:
        """Growth the interval confirms (lower end above zero); point estimate without one."""
        return self.ci[0] > 0 if self.ci is not None else self.per_h > 0


def judged_growth(summary: Summary, series: str = "rss") -> Growth | None:
    """The growth of ``series`` its budget was judged on (see the module docstring)."""
    metrics = summary.metrics
    names = [n for n in metrics if n.startswith(f"{series}_") and n.endswith("growth")]
    judged = [n for n in names if metrics[n].status]
    # Summaries written before the metric suffixes named the series alone.
    fallback = [n for n in (f"{series}_growth", series) if n in metrics]
    for name in [*judged, *fallback]:
        found = _growth(name, metrics[name])
        if found is not None:
            return found
    return None


def _growth(name: str, metric: Metric) -> Growth | None:
    if not metric.unit.endswith("/h") or not math.isfinite(metric.value):
        return None
    ci = metric.ci
    bounds = ci if ci is not None and all(map(math.isfinite, ci)) else None
    return Growth(name, metric.value, bounds, metric.unit, metric.status or None)


def garbage_per_kop(summary: Summary) -> float | None:
    """Objects freed by the cyclic collector per 1000 operations, when measured."""
    metric = summary.metrics.get("cyclic_garbage")
    return metric.value if metric is not None and math.isfinite(metric.value) else None


def column(summary: Summary) -> str:
    """``fixed`` or ``inject:<name>`` (several names joined with ``+``)."""
    return column_of(summary.injected)


def column_of(injected: Sequence[str]) -> str:
    return f"inject:{'+'.join(injected)}" if injected else FIXED


def cell_folder(scenario: str, column: str) -> str:
    """Where ``check`` puts a cell's run under its output folder: ``<scenario>/fixed``,
    ``<scenario>/inject-<name>``."""
    return f"{scenario}/{column.replace(':', '-')}"


def cell_of_folder(rundir: Path) -> tuple[str, str]:
    """The scenario and column of a folder laid out by :func:`cell_folder`; the folder's
    own name as a fixed cell's scenario when it is not laid out that way."""
    if rundir.name == FIXED:
        return rundir.parent.name, FIXED
    if rundir.name.startswith("inject-") and rundir.parent.name:
        return rundir.parent.name, f"inject:{rundir.name.removeprefix('inject-')}"
    return rundir.name, FIXED


def detect_s(summary: Summary) -> float | None:
    """Seconds until the verdict was certain; for a process ending, when it ended."""
    if summary.time_to_detect_s is not None:
        return summary.time_to_detect_s
    if summary.verdict in PROCESS_VERDICTS:
        return summary.duration_s
    return None
