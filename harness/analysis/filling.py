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

from harness.analysis.units import format_duration
from harness.runfiles.rundata import Series

FILL_GAUGE = "cached_tokens"
TAIL_FRACTION = 1 / 3  # the share of the window's samples where filling must still go on
MIN_RISE = 0.02  # a new high this much above the earlier one: the cache still fills
MIN_POINTS = 3  # gauge samples in the tail (every 0.5 s, fewer in allocation windows)


def still_filling(series: Series | None, start_s: float, end_s: float) -> str | None:
    """A sentence if ``cached_tokens`` still sets new highs at the end of the window.

    A full cache has reached its level before the last third of its samples and
    only swings below it (evictions, requests in flight); a filling one keeps
    passing its earlier maximum. Highs, not a slope: a tracemalloc window pauses the load
    and flattens a filling gauge for two seconds, and a full cache's swings
    can be steep.
    """
    if series is None or not end_s > start_s:
        return None
    keep = np.isfinite(series.v) & (series.t >= start_s) & (series.t <= end_s)
    t, v = series.t[keep], series.v[keep]
    # The last third of the samples, not of the time: a census of a big heap can stall
    # the workload (and the gauges) for seconds near the end of a short run.
    cut = len(v) - max(MIN_POINTS, int(len(v) * TAIL_FRACTION))
    if cut < 1:
        return None
    earlier, latest = float(np.max(v[:cut])), float(np.max(v[cut:]))
    if not earlier > 0 or latest < (1 + MIN_RISE) * earlier:
        return None
    span = float(t[-1] - t[cut])
    return (
        f"the cache is still filling: cached tokens reached {latest:,.0f} in the last "
        f"{format_duration(span)}, above the {earlier:,.0f} held before; growth bounded by its "
        "capacity cannot be told from a leak until it is full, so run until cached_tokens "
        "levels off"
    )
