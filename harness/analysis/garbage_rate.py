"""Cyclic garbage per 1000 operations, with an interval that uses every collection.

Every object the cyclic collector frees was garbage in a reference cycle: a
cache that unlinks its nodes cleanly makes none (reference counting frees
them), so objects per operation is the sharpest leak signal there is.

Two kinds of record carry it (see :mod:`harness.runfiles.rundata`): ``gc`` lines (young
generations 0 and 1 summed per flush, about once a second; every gen-2 on its
own) and garbage windows (what a forced collection found). The estimate is
all of them over the work done. Its interval has two sides to it:

- time blocks as independent units (a ratio estimator): honest for the total,
  but gen-2 frees in lumps tens of thousands of objects at a time, rarely (2 or
  3 in 15 s): the broken LRU scenarios measured ~1100 /kop with a 95% interval
  of 0 to 2300;
- the young collections alone: every second, each freeing the cycles that died
  young (hundreds to a couple of thousand objects a second in the broken LRU
  scenarios, exactly 0 in the fixed ones). They are a part of the total, so their
  lower bound is a lower bound of the total too, and a tight one.

The interval reported is ``[max(low_all, low_young), high_all]``, each side at
``1 - (1 - CONFIDENCE) / 2`` so that the two lower bounds together still miss
at most 2.5% of the time (Bonferroni): a 95% interval, overall.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from harness.runfiles.rundata import FloatArray, Series

Record = Mapping[str, Any]
RATE_BLOCKS = 20  # enough blocks for a t-interval, few enough to hold several gen-2 each
CONFIDENCE = 0.95
EACH = 1 - (1 - CONFIDENCE) / 2  # each of the two intervals combined (Bonferroni)
YOUNG = (0, 1)


@dataclass(frozen=True)
class Rate:
    """Objects per 1000 operations, with a 95% interval."""

    per_kop: float
    ci: tuple[float, float] | None  # None with under 3 blocks that saw work
    objects: float
    ops: float


@dataclass(frozen=True)
class Found:
    """Objects found (``amounts``) at times ``t`` (s); ``young`` marks gen 0/1 lines."""

    t: FloatArray
    amounts: FloatArray
    young: FloatArray  # bool as float: numpy masks stay one dtype


def cyclic_garbage(
    gc_events: Sequence[Record],
    garbage_windows: Sequence[Record],
    ops: Series,
    start_s: float,
    end_s: float,
) -> Rate | None:
    """Objects freed by the cyclic collector per kop, between ``start_s`` and ``end_s``.

    The gc sampler skips the collections the harness forces, so the objects a
    garbage window found are added back at the window's time: together they are
    everything the collector saw.
    """
    found = garbage_found(gc_events, garbage_windows)
    if found is None:
        return None
    return garbage_rate(found, ops, start_s, end_s)


def garbage_found(gc_events: Sequence[Record], garbage_windows: Sequence[Record]) -> Found | None:
    """Times (s) and objects found by the collector, from both record kinds.

    None when neither sampler ran: unknown is not zero.
    """
    if not gc_events and not garbage_windows:
        return None
    times = [float(e["t"]) for e in gc_events] + [float(w["t"]) for w in garbage_windows]
    amounts = [float(e.get("collected", 0)) for e in gc_events]
    amounts += [float(w.get("count", 0)) for w in garbage_windows]
    young = [float(int(e.get("gen", 2)) in YOUNG) for e in gc_events] + [0.0] * len(garbage_windows)
    return Found(*(np.asarray(x, dtype=np.float64) for x in (times, amounts, young)))


def garbage_rate(found: Found, ops: Series, start_s: float, end_s: float) -> Rate | None:
    """All garbage per kop, its interval narrowed from below by the young collections'."""
    total = block_rate(found.t, found.amounts, ops, start_s, end_s, EACH)
    if total is None or total.ci is None:
        return total
    young = found.young > 0
    low = young_low(found.t[young], found.amounts[young], ops, start_s, end_s)
    if low is None or not low > total.ci[0]:
        return total
    return Rate(total.per_kop, (min(low, total.per_kop), total.ci[1]), total.objects, total.ops)


def block_rate(
    times: FloatArray,
    amounts: FloatArray,
    ops: Series,
    start_s: float,
    end_s: float,
    confidence: float = CONFIDENCE,
) -> Rate | None:
    """Sum of ``amounts`` per 1000 operations of ``ops`` (cumulative), with a block CI."""
    if len(ops) < 2 or not end_s > start_s:
        return None
    edges = np.linspace(start_s, end_s, RATE_BLOCKS + 1)
    work = np.diff(np.interp(edges, ops.t, ops.v))
    inside = (times > start_s) & (times <= end_s)
    block = np.clip(np.searchsorted(edges, times[inside], side="left") - 1, 0, RATE_BLOCKS - 1)
    found = np.bincount(block, weights=amounts[inside], minlength=RATE_BLOCKS).astype(np.float64)
    total_ops = float(work.sum())
    if total_ops <= 0:
        return None
    ratio = float(found.sum()) / total_ops
    ci = _ratio_ci(found, work, ratio, confidence)
    return Rate(ratio * 1000.0, ci, float(found.sum()), total_ops)


def young_low(
    times: FloatArray, amounts: FloatArray, ops: Series, start_s: float, end_s: float
) -> float | None:
    """Lower bound (/kop, at ``EACH``) of the young collections' garbage per kop.

    The units are the gc sampler's flushes: each line holds what the young
    collections freed since the previous flush, so the work it goes with is
    the operations between the two flush times. A flush whose interval began
    before ``start_s`` is left out (it holds warm-up garbage).
    """
    flushes, index = np.unique(times[(times > start_s) & (times <= end_s)], return_inverse=True)
    if flushes.size < 4 or len(ops) < 2:
        return None
    inside = (times > start_s) & (times <= end_s)
    found = np.bincount(index, weights=amounts[inside]).astype(np.float64)[1:]
    work = np.diff(np.interp(flushes, ops.t, ops.v))
    if not work.sum() > 0:
        return None
    ratio = float(found.sum() / work.sum())
    ci = _ratio_ci(found, work, ratio, EACH)
    return ci[0] if ci is not None else None


def _ratio_ci(
    found: FloatArray, work: FloatArray, ratio: float, confidence: float
) -> tuple[float, float] | None:
    busy = work > 0
    k = int(np.count_nonzero(busy))
    if k < 3:
        return None
    # Linearised variance of a ratio of sums (Cochran, Sampling Techniques, 6.3).
    error = found[busy] - ratio * work[busy]
    se = math.sqrt(float(np.sum(error**2)) / (k * (k - 1))) / float(work[busy].mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, df=k - 1)) * se * 1000.0
    return max(ratio * 1000.0 - half, 0.0), ratio * 1000.0 + half
