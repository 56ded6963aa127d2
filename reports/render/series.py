"""Series helpers more than one report draws with: a run's time span, the collector's
running total."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.runfiles.rundata import FloatArray, RunData


def span_of(run: RunData) -> tuple[float, float]:
    """First and last sample time (s) over the series and gc lines a run has."""
    times = [s.t for s in (run.rss, run.uss, *run.gauges.values()) if len(s)]
    firsts = [float(t.min()) for t in times] + [float(e["t"]) for e in run.gc_events[:1]]
    lasts = [float(t.max()) for t in times] + [float(e["t"]) for e in run.gc_events[-1:]]
    if not firsts:
        return 0.0, 0.0
    return min(firsts), max(lasts)


def cumulative_collected(
    gc_events: Sequence[Mapping[str, Any]], garbage_windows: Sequence[Mapping[str, Any]]
) -> tuple[FloatArray, FloatArray]:
    """Times (s) and running total of objects the cyclic collector freed.

    The gc sampler skips the collections the garbage windows force, so their
    counts are added at the windows' times, as the analysis does.
    """
    records = [(float(e["t"]), float(e.get("collected", 0))) for e in gc_events]
    records += [(float(w["t"]), float(w.get("count", 0))) for w in garbage_windows]
    if not records:
        return np.zeros(0), np.zeros(0)
    records.sort(key=lambda r: r[0])
    t = np.asarray([r[0] for r in records], dtype=np.float64)
    total: FloatArray = np.cumsum([r[1] for r in records], dtype=np.float64)
    return t, total
