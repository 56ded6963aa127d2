"""A cache still filling towards its capacity: growth a short run cannot call a leak.

A prefix cache whose pool is larger than the traffic has yet filled keeps
adding nodes, keys and index tensors at the traffic's pace, then stops once
eviction starts: bounded growth that looks exactly like a leak until the bound
is reached. Two gauges the scheduler publishes show it:

- ``cached_tokens`` (evictable + protected tokens, from the cache protocol).
  While it still sets new highs at the end of the window, a byte or block
  growth beyond budget is ``suspicious``, never ``leak`` (:func:`still_filling`).
- ``tree_nodes``. A pool full of tokens is not yet a tree at its size: eviction
  and insertion keep splitting it into more, shorter nodes for a while (seen:
  the zoo's filling cache, full of tokens at 26 s, went from 91,700 to 93,200
  nodes by 85 s, and its C heap grew 7 MB with them, +280 MB/h judged on the
  last third of a 60 s run). :func:`tree_share` prices that growth at what each
  node cost while the cache filled; growth that is ``leak`` only with it counted
  becomes ``suspicious`` (:func:`unexplained`).

Both reasons say to run until the gauge levels off. On a cache that is full
(the reference scenarios fill theirs in seconds) neither changes anything:
their trees are small, so a node more or less prices at next to nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.slope import Slope, sen_slope
from harness.runfiles.rundata import Series
from harness.units import format_duration, format_rate

FILL_GAUGE = "cached_tokens"
NODE_GAUGE = "tree_nodes"
EDGE_S = 1.0  # the levels a node's price is taken from: medians over this long
MIN_FILL = 10.0  # nodes the tree must have gained before the window to price one
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


@dataclass(frozen=True)
class TreeShare:
    """The part of a series' growth the tree's own growth in nodes accounts for."""

    per_node: float  # series unit per node: the series' rise over the nodes' rise before
    nodes_per_h: float  # the node count's slope over the judged window
    span_s: float
    unit: str

    @property
    def per_h(self) -> float:
        return self.per_node * self.nodes_per_h

    def sentence(self) -> str:
        return (
            f"the cache's tree still grows: {NODE_GAUGE} rose {self.nodes_per_h:,.0f} /h over "
            f"the same {format_duration(self.span_s)}, and at the "
            f"{format_rate(self.per_node, self.unit)} per node it grew by while the tree filled, "
            f"that accounts for {format_rate(self.per_h, self.unit + '/h')}"
        )


def tree_share(series: Series, nodes: Series | None, first_s: float, window: tuple[float, float]
               ) -> TreeShare | None:
    """What the tree's growth in nodes over ``window`` accounts for in ``series``.

    Each node is priced at the series' rise over the node count's rise from
    ``first_s`` (the run's start: an empty tree) to the window's start. That
    price includes whatever else grew as the cache filled (the traffic's
    histories): the tree's growth can only explain growth that kept pace with
    the tree. None without a rising tree (a full one wanders around its size).
    """
    if nodes is None:
        return None
    start, end = window
    inside = np.isfinite(nodes.v) & (nodes.t >= start) & (nodes.t <= end)
    climb = sen_slope(nodes.t[inside], nodes.v[inside]) if np.count_nonzero(inside) >= 3 else None
    if climb is None or not climb.per_h > 0:
        return None
    price = _price(series, nodes, first_s, start)
    if price is None:
        return None
    return TreeShare(price, climb.per_h, end - start, series.unit)


def _price(series: Series, nodes: Series, first_s: float, until_s: float) -> float | None:
    grown_v = _level(series, until_s - EDGE_S, until_s) - _level(series, first_s, first_s + EDGE_S)
    grown_n = _level(nodes, until_s - EDGE_S, until_s) - _level(nodes, first_s, first_s + EDGE_S)
    if not (np.isfinite(grown_v) and np.isfinite(grown_n)) or grown_n < MIN_FILL or grown_v <= 0:
        return None
    return float(grown_v / grown_n)


def _level(series: Series, start_s: float, end_s: float) -> float:
    keep = np.isfinite(series.v) & (series.t >= start_s) & (series.t <= end_s)
    if not np.any(keep):  # no sample in the edge: the nearest one after its start
        later = np.isfinite(series.v) & (series.t >= start_s)
        return float(series.v[later][0]) if np.any(later) else float("nan")
    return float(np.median(series.v[keep]))


def unexplained(slope: Slope, share: TreeShare) -> tuple[float, tuple[float, float]]:
    """``slope``'s estimate and interval less the tree's share."""
    return slope.per_h - share.per_h, (slope.ci[0] - share.per_h, slope.ci[1] - share.per_h)
