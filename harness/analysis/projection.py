"""From growth measured under a synthetic load to growth at a production load.

A scenario runs its operations far faster (or slower) than a server takes
requests, so "MB per hour" from a test run says little about production by
itself. Growth per operation transfers: the bytes one insert/evict cycle
strands do not depend on how fast the cycles come.

That holds only for leaks driven by work. A leak driven by time, such as the
PP-sync one, grows with event rounds even when idle; for those, projecting by
operations is wrong and the measured per-hour growth is the number to quote.

Units: bytes (or objects) per hour, operations per second, requests per second.
"""

from __future__ import annotations

from dataclasses import dataclass

Interval = tuple[float, float]


@dataclass(frozen=True)
class Projection:
    """Growth per hour at the production load, with the interval carried through."""

    per_h: float
    ci: Interval | None
    per_op: float  # unit per operation, as measured
    ops_per_h: float  # operations per hour at the production load


def per_operation(per_h: float, ops_per_s: float) -> float:
    """Growth per operation from growth per hour and the run's throughput."""
    if not ops_per_s > 0:
        raise ValueError("growth per operation needs a run that did work (ops/s > 0).")
    return per_h / (ops_per_s * 3600.0)


def production_ops_per_h(requests_per_s: float, ops_per_request: float) -> float:
    """Operations per hour a server at ``requests_per_s`` performs."""
    if requests_per_s < 0 or ops_per_request < 0:
        raise ValueError("a request rate and ops per request cannot be negative.")
    return requests_per_s * ops_per_request * 3600.0


def project(
    per_h: float,
    ops_per_s: float,
    requests_per_s: float,
    ops_per_request: float = 1.0,
    ci: Interval | None = None,
) -> Projection:
    """Growth per hour implied at ``requests_per_s`` by a run growing ``per_h`` at ``ops_per_s``.

    The scale factor is exact (both throughputs are counted, not estimated), so
    the interval scales by the same factor.
    """
    per_op = per_operation(per_h, ops_per_s)
    ops_per_h = production_ops_per_h(requests_per_s, ops_per_request)
    scale = ops_per_h / (ops_per_s * 3600.0)
    scaled = (ci[0] * scale, ci[1] * scale) if ci is not None else None
    return Projection(per_h=per_op * ops_per_h, ci=scaled, per_op=per_op, ops_per_h=ops_per_h)
