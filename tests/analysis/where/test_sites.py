"""Python allocation sites from the allocation windows (harness.analysis.where.sites)."""

from __future__ import annotations

import pytest

from harness.analysis.summary import summarize
from harness.analysis.where.common import Site
from harness.analysis.where.sites import growing_sites, site_caller, site_finding
from tests.analysis.synth import MB, budgets
from tests.analysis.where.runs import LEAK_THEN_FILL, NONE, heap_run, typed_window, where_of, window


def test_a_site_must_grow_in_every_window_to_be_named() -> None:
    sites = growing_sites(LEAK_THEN_FILL)
    assert [s.site for s in sites] == ["cache.py:40"]  # memo.py filled, then stopped
    assert sites[0].per_h == 55_000 * 3600 and sites[0].windows == sites[0].of == 2
    assert sites[0].per_kop == 110_000


def test_a_site_that_kept_only_bigger_blocks_is_not_named() -> None:
    windows = [window(i, 6.0 * i, {"cache.py:40": 10_000, "radix.py:136": 5_504}) for i in (1, 2)]
    for w in windows:  # every tensor it made died; the one it resized grew
        w["sites"][1]["count"] = 0
    assert [s.site for s in growing_sites(windows)] == ["cache.py:40"]


def test_churn_far_slower_than_the_fastest_site_is_not_named_beside_it() -> None:
    # A 60 s zoo run: the culprit kept 220 MB/h; the tree's LRU dict and the pools'
    # free lists grew 33 and 10 MB/h inside the windows. A second leak at 80 stays.
    churn = {"zoo.py:39": 22_000, "refcache/lru.py:94": 3_300, "refcache/pools.py:87": 1_000}
    assert [s.site for s in growing_sites([window(i, 6.0 * i, churn) for i in (1, 2)])] == [
        "zoo.py:39"]
    second = {"zoo.py:39": 22_000, "cache.py:12": 8_000}
    assert [s.site for s in growing_sites([window(i, 6.0 * i, second) for i in (1, 2)])] == [
        "zoo.py:39", "cache.py:12"]


def test_a_heap_leak_names_its_site_and_a_pass_names_nothing() -> None:
    heap = budgets("heap: 10 MB/h")
    leak = summarize(heap_run(200 * MB, LEAK_THEN_FILL), heap, calibration=NONE)
    where = [w["text"] for w in where_of(leak)]
    assert leak.verdict == "leak"
    assert where[0].startswith(
        "cache.py:40 (called from caller.py:3) keeps what it allocates: +198 MB/h")
    assert not any("memo.py" in w for w in where)
    healthy = summarize(heap_run(0.0, LEAK_THEN_FILL), heap, calibration=NONE)
    assert healthy.verdict == "pass"
    assert [w["kind"] for w in where_of(healthy)] == ["none"]


def test_a_site_names_the_first_caller_outside_its_file() -> None:
    helper = Site("util.py:9", ("util.py:9", "util.py:20", "cache.py:40", "loop.py:1"),
                  1e6, None, 2, 2)
    assert site_caller(helper) == "cache.py:40"
    assert site_caller(Site("cache.py:40", ("cache.py:40",), 1e6, None, 2, 2)) is None


def test_a_site_whose_objects_the_run_does_not_keep_is_turnover_not_a_leak() -> None:
    made = {"tree.py:68": [{"type": "TreeNode", "made": 50, "grew": -3}],  # evicted later
            "cache.py:40": [{"type": "list", "made": 20, "grew": 95}]}  # kept, all of them
    windows = [typed_window(1, 6.0, made), typed_window(2, 14.0, made)]
    [site] = growing_sites(windows)
    assert site.site == "cache.py:40" and site.kept is not None
    assert site.kept.type == "list" and site.kept.share == pytest.approx(95 / (20 * 5))
    assert site_finding(site).text.endswith(
        "; the list objects it makes grew by 95 over 10 s, 95% of what it made")
    few = {"tree.py:68": [{"type": "TreeNode", "made": 5, "grew": 0}]}  # too few to say
    assert [s.site for s in growing_sites([typed_window(1, 6.0, few),
                                           typed_window(2, 14.0, few)])] == ["tree.py:68"]


def test_the_scenario_driver_is_never_named_by_either_path_form() -> None:
    """RELIABILITY-3 case 89: from a folder outside the checkout the sampler names the
    driver's files by their absolute paths, and scheduler.py and health.py were named."""
    from harness.analysis.where.common import from_driver
    from harness.provenance import REPO_ROOT

    driver = str(REPO_ROOT / "scenarios" / "workloads")
    sites = {f"{driver}/scheduler.py:285": 30_000, f"{driver}/health.py:54": 20_000,
             "scenarios/workloads/traffic.py:84": 25_000, "/home/me/mycache/cache.py:12": 10_000}
    assert [s.site for s in growing_sites([window(i, 6.0 * i, sites) for i in (1, 2)])] == [
        "/home/me/mycache/cache.py:12"]
    assert from_driver(f"{driver}/slots.py:201") and not from_driver("/elsewhere/scenarios.py:1")
    called = Site("refcache/radix.py:136", ("refcache/radix.py:136",
                                            f"{driver}/scheduler.py:291"), 1e6, None, 2, 2)
    assert site_caller(called) is None  # the driver calls the code under test; it is not it
