"""bench/calibrate.py --merge replaces a scenario's points, --replace those of one length,
--add adds to them; '*' pools again."""

from __future__ import annotations

from bench.calibrate import added, calibration, merged, replaced


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


def test_add_keeps_every_point_and_adds_the_new_ones_beside_them() -> None:
    old = {"format": 1, "measured": "then", "how": "x", "signals": {
        "heap": {"a": [[20.0, 5.0]], "b": [[20.0, 7.0]], "*": [[20.0, 5.0], [20.0, 7.0]]}}}
    longer = {"format": 1, "measured": "now", "how": "10m", "signals": {
        "heap": {"b": [[590.0, 3.0]], "*": [[590.0, 3.0]]},
        "rss": {"b": [[580.0, 0.0]], "*": [[580.0, 0.0]]}}}
    got = added(old, longer)
    assert got["signals"]["heap"]["b"] == [[20.0, 7.0], [590.0, 3.0]]
    assert got["signals"]["heap"]["a"] == [[20.0, 5.0]]
    assert got["signals"]["heap"]["*"] == [[20.0, 5.0], [20.0, 7.0], [590.0, 3.0]]
    assert got["signals"]["rss"] == {"b": [[580.0, 0.0]], "*": [[580.0, 0.0]]}
    assert got["measured"] == "then; added for b: now" and got["how"] == "x; added for b: 10m"


def test_replace_swaps_only_the_measured_signal_and_length() -> None:
    old = {"format": 1, "measured": "then", "how": "x", "signals": {
        "heap": {"a": [[17.5, 4.0], [57.9, 30.0], [597.0, 0.0]], "b": [[57.0, 8.0]],
                 "*": [[17.5, 4.0], [57.0, 8.0], [57.9, 30.0], [597.0, 0.0]]},
        "rss": {"a": [[57.9, 50.0]], "*": [[57.9, 50.0]]}}}
    new = {"format": 1, "measured": "now", "how": "8 seeds", "signals": {
        "heap": {"a": [[57.8, 10.0], [58.0, 12.0]], "*": [[57.8, 10.0], [58.0, 12.0]]}}}
    got = replaced(old, new)
    heap = got["signals"]["heap"]
    assert heap["a"] == [[17.5, 4.0], [57.8, 10.0], [58.0, 12.0], [597.0, 0.0]]
    assert heap["b"] == [[57.0, 8.0]]  # a scenario not measured keeps its points
    assert heap["*"] == sorted([*heap["a"], *heap["b"]])
    assert got["signals"]["rss"] == old["signals"]["rss"]  # a signal not measured too
    assert got["how"] == "x; heap of a replaced: 8 seeds"


def test_a_targets_points_stay_out_of_the_pool_the_reference_scenarios_share() -> None:
    signals = calibration([("heap", "a", 18.0, 10.0), ("heap", "a@sglang", 18.0, 90.0)])
    assert signals["heap"] == {"a": [[18.0, 15]], "*": [[18.0, 15]], "a@sglang": [[18.0, 135]]}
    old = {"format": 1, "measured": "then", "how": "x", "signals": signals}
    new = {"format": 1, "measured": "now", "how": "y", "signals": {
        "heap": {"b@sglang": [[18.0, 7.0]]}}}
    assert added(old, new)["signals"]["heap"]["*"] == [[18.0, 15]]
    assert merged(old, new, ["b@sglang"])["signals"]["heap"]["*"] == [[18.0, 15]]
