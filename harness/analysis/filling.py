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
TAIL_FRACTION = 1 / 3  # the part of the window where filling must still go on
MIN_RISE = 0.02  # a new high this much above the earlier one: the cache still fills
MIN_POINTS = 3  # gauge samples in the tail (every 0.5 s, fewer in allocation windows)


def still_filling(series: Series | None, start_s: float, end_s: float) -> str | None:
    """A sentence if ``cached_tokens`` still sets new highs at the end of the window.

    A full cache has reached its level before the last third and only swings
    below it (evictions, requests in flight); a filling one keeps passing its
    earlier maximum. Highs, not a slope: a tracemalloc window pauses the load
    and flattens a filling gauge for two seconds, and a full cache's swings
    can be steep.
    """
    if series is None or not end_s > start_s:
        return None
    tail_start = end_s - (end_s - start_s) * TAIL_FRACTION
    ok = np.isfinite(series.v)
    tail = ok & (series.t >= tail_start) & (series.t <= end_s)
    before = ok & (series.t >= start_s) & (series.t < tail_start)
    if np.count_nonzero(tail) < MIN_POINTS or not np.any(before):
        return None
    earlier, latest = float(np.max(series.v[before])), float(np.max(series.v[tail]))
    if not earlier > 0 or latest < (1 + MIN_RISE) * earlier:
        return None
    span = float(series.t[tail][-1] - tail_start)
    return (
        f"the cache is still filling: cached tokens reached {latest:,.0f} in the last "
        f"{format_duration(span)}, above the {earlier:,.0f} held before; growth bounded by its "
        "capacity cannot be told from a leak until it is full, so run until cached_tokens "
        "levels off"
    )
