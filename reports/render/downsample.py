"""Fewer points for drawing only: statistics always see every raw sample.

A 24 h run at 10 Hz has 864,000 RSS samples and a plot is about 1000 pixels
wide. :func:`envelope` keeps, per pixel-wide time bucket, the lowest and the
highest sample in the order they happened (min/max or "M4"-style
downsampling), so the drawn line covers exactly the pixels the full line
would: spikes and sawtooth drops stay visible, unlike with averaging or
taking every n-th sample.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from harness.runfiles.rundata import FloatArray, clean

PIXELS = 1000  # about the plot width at the report's DPI
IndexArray = npt.NDArray[np.intp]


def envelope(t: FloatArray, v: FloatArray, buckets: int = PIXELS) -> tuple[FloatArray, FloatArray]:
    """At most ``2 * buckets`` points (time-ordered) tracing the min and max of ``v``.

    NaN samples are dropped; short series come back unchanged (sorted).
    """
    t, v = clean(t, v)
    if t.size <= 2 * buckets:
        return t, v
    edges = np.linspace(t[0], t[-1], buckets + 1)
    starts = np.unique(np.searchsorted(t, edges[:-1], side="left"))
    starts = starts[starts < t.size]
    first_min = _first_index_of(v, starts, np.minimum.reduceat(v, starts))
    first_max = _first_index_of(v, starts, np.maximum.reduceat(v, starts))
    # Per bucket, whichever extreme came first is drawn first: a drop stays a drop.
    order = np.sort(np.column_stack((first_min, first_max)), axis=1).ravel()
    return t[order], v[order]


def _first_index_of(v: FloatArray, starts: IndexArray, extremes: FloatArray) -> IndexArray:
    """Index of the first sample in each bucket equal to that bucket's extreme."""
    counts = np.diff(np.append(starts, v.size))
    hit = v == np.repeat(extremes, counts)
    index = np.where(hit, np.arange(v.size), v.size)
    found: IndexArray = np.minimum.reduceat(index, starts)
    return found
