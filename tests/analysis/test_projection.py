"""Projection from growth under test load to growth at a production request rate."""

from __future__ import annotations

import pytest

from harness.analysis.projection import per_operation, production_ops_per_h, project


def test_growth_per_operation() -> None:
    # 3.6 GB/h at 1000 ops/s: 3.6e6 ops/h, so 1000 bytes per op.
    assert per_operation(3.6e9, 1000.0) == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="did work"):
        per_operation(1e6, 0.0)


def test_production_ops_per_hour() -> None:
    assert production_ops_per_h(20.0, 3.0) == pytest.approx(216_000.0)
    with pytest.raises(ValueError, match="cannot be negative"):
        production_ops_per_h(-1.0, 1.0)


def test_projection_scales_estimate_and_interval() -> None:
    # 1000 B/op; production: 50 req/s x 4 ops = 200 ops/s = 720,000 ops/h.
    got = project(3.6e9, 1000.0, 50.0, 4.0, ci=(1.8e9, 5.4e9))
    assert got.per_op == pytest.approx(1000.0)
    assert got.ops_per_h == pytest.approx(720_000.0)
    assert got.per_h == pytest.approx(7.2e8)
    assert got.ci == pytest.approx((3.6e8, 1.08e9))
    assert project(3.6e9, 1000.0, 50.0).ci is None
