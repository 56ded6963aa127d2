"""Python allocation sites from the allocation windows (harness.analysis.where.sites)."""

from __future__ import annotations

import pytest

from harness.analysis.summary import summarize
from harness.analysis.where.common import Site
from harness.analysis.where.sites import growing_sites, own_line, site_caller, site_finding
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


def test_a_table_re_allocated_at_its_working_size_is_not_a_growing_site() -> None:
    """Issue 42, item 4: a 28 MB/h leak beside radix-steady's turnover. The LRU's member
    dict re-allocates its 9 KB table once in each window (one block, no object the
    collector tracks, as large in the last window as in the first): +33 MB/h inside a
    1 s window, above the leak's own line, which it led (a fixed mamba-lru run named
    refcache/lru.py:94 alone, a 4.6 KB table in both windows)."""
    def lru_window(index: int, t: float, table: int) -> dict[str, object]:
        line = window(index, t, {"refcache/lru.py:94": table, "leak.py:56": 7_800}, size=200)
        line["sites"][0]["count"] = 1
        return line

    flat = [lru_window(1, 18.5, 9_240), lru_window(2, 41.7, 9_240)]
    assert [s.site for s in growing_sites(flat)] == ["leak.py:56"]
    # A dict that keeps growing doubles its table between windows: still a growing site.
    doubling = [lru_window(1, 18.5, 9_240), lru_window(2, 41.7, 18_520)]
    assert [s.site for s in growing_sites(doubling)] == ["refcache/lru.py:94", "leak.py:56"]


def test_a_site_that_freed_as_much_as_it_kept_is_turnover_and_the_net_is_its_rate() -> None:
    """A node's key is made on one request's path and freed with the node on another:
    each window's bytes are matched by what its other paths freed. The leak frees
    nothing; a site that freed a tenth of what it made keeps the rest as its rate."""
    def churned(index: int, t: float) -> dict[str, object]:
        line = window(index, t, {"refcache/keys.py:30": 10_000, "leak.py:56": 7_800,
                                 "cache.py:12": 5_000})
        line["sites"][0]["freed"] = 9_000  # allocated ~ freed
        line["sites"][2]["freed"] = 500
        return line

    sites = growing_sites([churned(1, 6.0), churned(2, 14.0)])
    assert [s.site for s in sites] == ["leak.py:56", "cache.py:12"]
    assert sites[1].per_h == (5_000 - 500) * 3600


def test_a_library_line_is_named_by_the_code_outside_its_folder_that_asked_for_it() -> None:
    """Issue 42, item 4: a leak keeps ``req.key()``; its bytes are allocated at the key's
    constructor (refcache/keys.py:24, the line the tree's own requests make keys at),
    called from refcache/req.py. The first frame outside refcache/ is the leak's line:
    named first, the library line after it. A stack that leaves the folder only for
    the scenarios' side (the driver, an adapter) keeps the first caller outside the file."""
    def keyed(index: int, t: float, stack: list[str]) -> dict[str, object]:
        line = window(index, t, {"refcache/keys.py:24": 7_800})
        line["sites"][0]["stack"] = stack
        return line

    leak = ["refcache/keys.py:24", "refcache/req.py:45", "leak/finished.py:56",
            "scenarios/workloads/scheduler.py:328"]
    [site] = growing_sites([keyed(1, 6.0, leak), keyed(2, 14.0, leak)])
    assert site.own == "leak/finished.py:56"
    finding = site_finding(site)
    assert finding.text.startswith(
        "leak/finished.py:56 keeps what it allocates at refcache/keys.py:24: +28.1 MB/h")
    assert finding.site == "leak/finished.py:56"
    tree = ["refcache/keys.py:24", "refcache/req.py:45", "refcache/radix.py:176",
            "scenarios/workloads/scheduler.py:330"]
    [alone] = growing_sites([keyed(1, 6.0, tree), keyed(2, 14.0, tree)])
    assert alone.own is None and site_finding(alone).text.startswith(
        "refcache/keys.py:24 (called from refcache/req.py:45) keeps what it allocates")
    helper = ["/usr/lib/python3.11/copy.py:9", "refcache/keys.py:24",
              "scenarios/sglang/handles.py:80"]
    assert own_line("refcache/keys.py:24", helper) is None  # an adapter asked
    assert own_line("refcache/keys.py:24", helper[:1]) is None  # the site is not in it
    # A --target subclass wrapping the tree's call: the stack ends at the wrapper, which
    # cannot be told from the owner there (its 60 s run named it for the tree's nodes).
    wrapper = ["refcache/radix_tree.py:191", "refcache/radix_tree.py:175",
               "refcache/radix.py:176", "bench/zoo/base.py:45"]
    assert own_line("refcache/radix_tree.py:191", wrapper) is None
    # ...and one the stack shows calling back into the library is not its owner either.
    back = ["refcache/keys.py:24", "zoo/base.py:45", "refcache/radix.py:176",
            "scenarios/workloads/scheduler.py:330"]
    assert own_line("refcache/keys.py:24", back) is None
