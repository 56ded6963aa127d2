"""A cache still filling towards its capacity: growth a short run cannot call a leak.

A prefix cache whose pool is larger than the traffic has yet filled keeps
adding nodes, keys and index tensors at the traffic's pace, then stops once
eviction starts: bounded growth that looks exactly like a leak until the bound
is reached. The scheduler publishes ``cached_tokens`` (evictable + protected
tokens, from the cache protocol). While it still climbs at the end of the
window, a byte or block growth beyond budget is ``suspicious``, never ``leak``,
and the reason says to run until the cache is full. On a cache that is full
(the reference scenarios fill theirs in seconds) nothing changes.
"""

from __future__ import annotations

import numpy as np

from harness.analysis.slope import sen_slope
from harness.analysis.units import format_duration
from harness.runfiles.rundata import Series

FILL_GAUGE = "cached_tokens"
TAIL_FRACTION = 1 / 3  # the part of the window where filling must still go on
MIN_RISE = 0.05  # over that tail, relative to its level: below this the cache is full
MIN_POINTS = 5  # gauge samples in the tail (every 0.5 s by default) to fit a slope on


def still_filling(series: Series | None, start_s: float, end_s: float) -> str | None:
    """A sentence if ``cached_tokens`` still climbs at the end of the window, else None."""
    if series is None or not end_s > start_s:
        return None
    tail_start = end_s - (end_s - start_s) * TAIL_FRACTION
    keep = (series.t >= tail_start) & (series.t <= end_s) & np.isfinite(series.v)
    t, v = series.t[keep], series.v[keep]
    if len(t) < MIN_POINTS or not np.max(v) > 0:
        return None
    slope = sen_slope(t, v)
    if slope is None or not slope.ci[0] > 0:
        return None
    rise = slope.per_h * (t[-1] - t[0]) / 3600
    if rise < MIN_RISE * float(np.median(v)):
        return None
    return (
        f"the cache is still filling: cached tokens rose from {v[0]:,.0f} to {v[-1]:,.0f} "
        f"over the last {format_duration(t[-1] - t[0])}; growth bounded by its capacity "
        "cannot be told from a leak until it is full, so run until cached_tokens levels off"
    )
