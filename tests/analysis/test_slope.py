"""Growth per hour of linear series: recovered, with intervals that cover the truth."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.slope import MAX_POINTS, block_means, robust_spread, sen_slope
from harness.analysis.trend import growth
from tests.analysis.synth import HOUR, MB, ar1, linear, times

SEEDS = range(50)
RATES = [20 * MB, 200 * MB, 2000 * MB]


@pytest.mark.parametrize("per_h", RATES)
@pytest.mark.parametrize("noise", ["independent", "ar1"])
def test_linear_growth_recovered_and_covered(per_h: float, noise: str) -> None:
    """A 2 h run at 1 Hz: within 15% every time, the 95% interval covers >= 90%.

    Checked for the whole-window slope and for the one a budget is judged on
    (the last third, in the few runs where it confirms more growth).
    """
    t = times(2 * HOUR, 1.0)
    covered, judged_covered, errors = 0, 0, []
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        wobble = rng.normal(0, 2 * MB, t.size) if noise == "independent" else ar1(
            rng, t.size, 0.95, 5 * MB
        )
        trend = growth(t, linear(t, per_h) + wobble)
        assert trend is not None and trend.basis in ("all", "tail")
        covered += trend.overall.ci[0] <= per_h <= trend.overall.ci[1]
        judged_covered += trend.judged.ci[0] <= per_h <= trend.judged.ci[1]
        errors.append(abs(trend.judged.per_h - per_h) / per_h)
    assert max(errors) < 0.15
    assert covered >= 45 and judged_covered >= 45


def test_interval_stays_honest_under_strong_correlation() -> None:
    """10 Hz for 30 min, noise correlated over ~20 s: still >= 90% coverage."""
    t = times(1800, 10.0)
    covered = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        slope = sen_slope(t, linear(t, 100 * MB) + ar1(rng, t.size, 0.995, 4 * MB))
        assert slope is not None
        covered += slope.ci[0] <= 100 * MB <= slope.ci[1]
        assert slope.n_eff < slope.n  # the correlation was seen and paid for
    assert covered >= 45


def test_block_means_bound_the_points_and_keep_the_mean() -> None:
    t = times(3 * HOUR, 10.0)
    v = np.sin(t / 100.0) + t * 1e-3
    tb, vb = block_means(t, v)
    assert tb.size == MAX_POINTS
    assert np.all(np.diff(tb) > 0)
    assert vb.mean() == pytest.approx(v.mean(), rel=1e-3)
    short_t, short_v = block_means(t[:100], v[:100])
    assert np.array_equal(short_t, t[:100]) and np.array_equal(short_v, v[:100])


def test_constant_series_has_zero_slope_and_no_trend() -> None:
    t = times(600, 1.0)
    slope = sen_slope(t, np.full(t.size, 4.0))
    assert slope is not None
    assert (slope.per_h, slope.ci, slope.p_value) == (0.0, (0.0, 0.0), 1.0)
    assert not slope.significant


def test_integer_gauge_with_ties_gets_a_finite_interval() -> None:
    """A count gauge stepping by whole numbers: tied values must not break the test."""
    t = times(HOUR, 1.0)
    v = np.floor(t / 60.0)  # +1 per minute: 60 /h
    slope = sen_slope(t, v)
    assert slope is not None and slope.significant
    assert slope.per_h == pytest.approx(60.0, rel=0.05)
    assert slope.ci[0] <= 60.0 <= slope.ci[1]


def test_slope_shrugs_off_outliers() -> None:
    rng = np.random.default_rng(7)
    t = times(HOUR, 1.0)
    v = linear(t, 100 * MB) + rng.normal(0, 1 * MB, t.size)
    spikes = rng.choice(t.size, size=t.size // 20, replace=False)
    v[spikes] += 2000 * MB  # 5% of samples read mid-allocation
    slope = sen_slope(t, v)
    assert slope is not None
    assert slope.per_h == pytest.approx(100 * MB, rel=0.1)


def test_too_few_points_give_no_slope() -> None:
    assert sen_slope(np.array([0.0, 1.0]), np.array([1.0, 2.0])) is None
    assert sen_slope(np.zeros(10), np.arange(10.0)) is None  # one instant


def test_robust_spread_matches_sd_for_normal_noise() -> None:
    rng = np.random.default_rng(3)
    assert robust_spread(rng.normal(0, 5.0, 100_000)) == pytest.approx(5.0, rel=0.02)
    assert robust_spread(np.zeros(0)) == 0.0
