"""The pure pieces: downsampling, number formatting, the fitted line, plot data."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.summary import summarize
from harness.runfiles.rundata import RunData, Series
from reports.render.downsample import envelope
from reports.render.fitline import FitLine
from reports.render.numbers import format_growth, sig, time_unit, value_cells
from reports.run.plotdata import garbage_stack, gc_totals


def test_envelope_keeps_every_extreme_and_bounds_the_size() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(864_000) / 10.0
    v = np.cumsum(rng.normal(size=t.size))
    v[123_456] += 1e4  # one spike a mean or a stride would lose
    out_t, out_v = envelope(t, v, buckets=1000)
    assert out_t.size <= 2000
    assert out_v.max() == v.max() and out_v.min() == v.min()
    assert np.all(np.diff(out_t) >= 0)


def test_envelope_leaves_short_series_alone_and_drops_nan() -> None:
    t = np.arange(10.0)
    v = np.where(t == 3, np.nan, t)
    out_t, out_v = envelope(t, v)
    assert out_t.size == 9 and not np.isnan(out_v).any()


def test_a_drop_stays_a_drop_after_downsampling() -> None:
    t = np.arange(10_000.0)
    v = np.where(t < 5_000, t, 0.0)  # rises, then falls at once
    _, out_v = envelope(t, v, buckets=10)
    peak = int(np.argmax(out_v))
    assert out_v[peak + 1] == 0.0  # the fall follows the peak, not the other way round


@pytest.mark.parametrize(
    ("per_h", "ci", "expected"),
    [
        (3.7e9, (3.5e9, 3.9e9), "+3.7 GB/h [3.5, 3.9]"),
        (-1.2e6, (-3e6, 0.5e6), "-1.2 MB/h [-3, 0.5]"),
        (0.0, (0.0, 0.0), "0 B/h [0, 0]"),
    ],
)
def test_growth_text(per_h: float, ci: tuple[float, float], expected: str) -> None:
    assert format_growth(per_h, ci, "B/h") == expected


def test_value_cells_share_one_prefix_and_handle_missing() -> None:
    assert value_cells(2.5e8, [1e8, 4e8], "B/h") == ("250", "MB/h", "[100, 400]")
    assert value_cells(None, None, "/kop") == ("–", "/kop", "")
    assert sig(float("nan")) == "–" and sig(16384.0) == "16,384"


def test_time_unit_by_span() -> None:
    assert time_unit(40)[1] == "seconds"
    assert time_unit(600)[1] == "minutes"
    assert time_unit(86_400)[1] == "hours"


def fit_line(series: Series, warmup_s: float | None) -> FitLine | None:
    """The RSS line a fresh summary stores for ``series``, as a report reads it."""
    details = summarize(RunData(header={}, rss=series), [], warmup_s).details.series or {}
    return FitLine.from_fitted(details["rss"].fit) if "rss" in details else None


def test_fit_line_recovers_slope_and_passes_through_the_data() -> None:
    rng = np.random.default_rng(2)
    t = np.arange(0, 3600, 1.0)
    v = 1e8 + 50e6 / 3600 * t + rng.normal(0, 1e5, t.size)
    fit = fit_line(Series(t, v, "B"), warmup_s=60.0)
    assert fit is not None
    assert abs(fit.per_h - 50e6) < 0.5e6 and fit.ci[0] <= fit.per_h <= fit.ci[1]
    assert abs(fit.at(np.asarray([1800.0]))[0] - (1e8 + 25e6)) < 1e6
    band_t, low, high = fit.band()
    assert np.all(low <= high) and band_t[0] >= 60.0


def test_fit_line_needs_samples() -> None:
    assert fit_line(Series(np.arange(3.0), np.arange(3.0), "B"), None) is None


def test_gc_totals_accumulate_per_generation() -> None:
    events = [{"t": 1.0, "gen": 0, "count": 5, "collected": 10},
              {"t": 2.0, "gen": 2, "count": 1, "collected": 100},
              {"t": 3.0, "gen": 2, "count": 1, "collected": 50}]
    totals = gc_totals(events)
    assert totals is not None
    assert list(totals.collections[2]) == [1, 2] and list(totals.freed[2]) == [100, 150]
    assert totals.per_min(2, totals.collections, 60.0) == 2.0
    assert totals.per_min(1, totals.collections, 60.0) == 0.0


def test_garbage_stack_groups_small_types_and_merges_many_windows() -> None:
    windows = [{"t": float(i), "count": 12, "by_type": {f"T{j}": 1 for j in range(12)}}
               for i in range(250)]
    stack = garbage_stack(windows, top=8)
    assert stack is not None
    assert stack.types[-1] == "other types" and len(stack.types) == 9
    assert stack.t.size <= 60 and stack.merged == 5
    assert np.allclose(stack.counts.sum(axis=0), 12)  # a mean per window, last group too
    assert garbage_stack([{"t": 1.0, "count": 0, "by_type": {}}]) is None
