"""bench/calibrate.py --merge: re-measured scenarios replace their points, '*' pools again."""

from __future__ import annotations

from bench.calibrate import merged


def test_merge_replaces_the_measured_scenarios_and_pools_every_point_again() -> None:
    old = {"format": 1, "measured": "then", "how": "x", "signals": {
        "heap": {"a": [[20.0, 5.0]], "b": [[20.0, 7.0]], "*": [[20.0, 5.0], [20.0, 7.0]]}}}
    new = {"format": 1, "measured": "now", "how": "y", "signals": {
        "heap": {"b": [[20.0, 1.0]], "c": [[60.0, 9.0]], "*": [[20.0, 1.0], [60.0, 9.0]]}}}
    got = merged(old, new, ["b", "c"])
    heap = got["signals"]["heap"]
    assert heap["a"] == [[20.0, 5.0]] and heap["b"] == [[20.0, 1.0]] and heap["c"] == [[60.0, 9.0]]
    assert heap["*"] == [[20.0, 1.0], [20.0, 5.0], [60.0, 9.0]]
    assert got["measured"] == "then; b, c: now" and got["how"] == "x; b, c re-measured: y"
    again = merged(got, {**new, "measured": "later"}, ["b", "c"])
    assert again["measured"] == "then; b, c: later"  # the superseded note goes
