"""Where it grows: a culprit for failing budgets only, from the worker's records."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.analysis.attribution import growing_sites, native_finding, where_it_grows
from harness.analysis.calibration import Calibration
from harness.analysis.summary import summarize
from harness.analysis.verdict import Judgement
from harness.budgets import parse_budget
from harness.runfiles.rundata import Series
from tests.analysis.synth import MB, budgets, linear, run_data, times

NONE = Calibration({})


def window(index: int, t: float, sites: dict[str, int], size: int = 100) -> dict[str, Any]:
    return {"type": "alloc", "window": index, "t": t, "from_t": t - 1.0, "ops": 500,
            "sites": [{"site": s, "stack": [s, "caller.py:3"], "bytes": b, "count": b // size}
                      for s, b in sites.items()]}


LEAK_THEN_FILL = [
    window(1, 6.0, {"cache.py:40": 50_000, "memo.py:9": 80_000}),
    window(2, 14.0, {"cache.py:40": 60_000, "traffic.py:67": 2_000}),
]


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


def test_heap_growth_python_does_not_explain_is_called_native() -> None:
    large = [window(1, 6.0, {"cache.py:40": 50_000}, 4096),
             window(2, 14.0, {"cache.py:40": 60_000}, 4096)]  # malloc-sized: in the heap
    (native,) = native_finding(500 * MB, growing_sites(large))  # sites: 198 MB/h
    assert native.kind == "native" and "native memory grows ~302 MB/h" in native.text
    assert "memray" in native.text
    assert native_finding(300 * MB, growing_sites(large)) == []  # mostly explained
    # 100-byte objects live in pymalloc's arenas: they explain none of the C heap.
    (small,) = native_finding(300 * MB, growing_sites(LEAK_THEN_FILL))
    assert "native memory grows ~300 MB/h" in small.text
    (untraced,) = native_finding(500 * MB, [], traced=False)
    assert "no allocation windows" in untraced.text and "native memory" not in untraced.text


def heap_run(per_h: float, windows: list[dict[str, Any]]) -> Any:
    t = times(20, 10.0)
    run = run_data((t, linear(t, 0.0, base=300 * MB)), warmup_end_s=2.0, loop_end_s=20.0)
    run.memory["heap"] = Series(t, linear(t, per_h, base=50 * MB), "B")
    run.alloc_windows = windows
    return run


def test_a_heap_leak_names_its_site_and_a_pass_names_nothing() -> None:
    heap = budgets("heap: 10 MB/h")
    leak = summarize(heap_run(200 * MB, LEAK_THEN_FILL), heap, calibration=NONE)
    where = [w["text"] for w in leak.details["where"]]
    assert leak.verdict == "leak"
    assert where[0].startswith(
        "cache.py:40 (called from caller.py:3) keeps what it allocates: +198 MB/h")
    assert not any("memo.py" in w for w in where)
    healthy = summarize(heap_run(0.0, LEAK_THEN_FILL), heap, calibration=NONE)
    assert healthy.verdict == "pass"
    assert [w["kind"] for w in healthy.details["where"]] == ["none"]


def test_levels_and_cycles_are_named_by_what_saw_them() -> None:
    run = run_data(gauges={"locked_while_idle": (np.arange(10.0), np.full(10, 64.0))})
    run.garbage_windows = [{"t": 5.0, "cycles": [{"path": ["Node.prev", "Node.parent"]}]}]
    judged_on = budgets("locked_while_idle: <= 0", "cyclic_garbage: 0.5 /kop")
    judged = [Judgement("leak", "sustained-level", "locked_while_idle held 64"),
              Judgement("leak", "confirmed-growth", "cyclic garbage 3 /kop")]
    found = where_it_grows(run, judged_on, judged, {})
    assert [f.kind for f in found] == ["cycles", "level"]  # the attribute before the gauge
    assert "Node.parent -> Node.prev -> (back)" in found[0].text or \
        "Node.prev -> Node.parent -> (back)" in found[0].text
    assert found[1].signal == "locked_while_idle"


def test_owner_paths_and_tensor_views_come_from_the_owners_line() -> None:
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [
        {"type": "Tensor", "grew": 224, "sampled": 8, "agree": 4, "path": "Cache.tree -> Tensor",
         "others": [{"path": "Cache.kept -> list[40] -> Tensor", "agree": 3},
                    {"path": "Scheduler.running -> Tensor", "agree": 1}]},
        {"type": "dict", "grew": 125, "path": None, "why": "holders disagree"},
    ], "tensors": {"oversized": {"storages": 52, "storage_bytes": 1_110_000, "view_bytes": 480,
                                 "example": {"view_bytes": 8, "storage_bytes": 183_600,
                                             "path": "Cache.kept -> list[45] -> Tensor"}}}}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    texts = [f.text for f in found]
    assert ("52 tensor storages (1.11 MB) are kept alive by 480 B of views; e.g. a 8 B view of "
            "a 184 KB storage, held by Cache.kept -> list[45] -> Tensor") in texts
    assert "Tensor (+224, 4 of 8 sampled) is held by Cache.tree -> Tensor" in texts
    assert "Tensor (+224, 3 of 8 sampled) is held by Cache.kept -> list[40] -> Tensor" in texts
    assert not any("Scheduler.running" in t or "dict (+125" in t for t in texts)


def test_the_scenario_driver_is_never_named_and_paths_start_at_the_workload() -> None:
    windows = [window(i, 6.0 * i, {"scenarios/workloads/traffic.py:67": 90_000,
                                   "cache.py:40": 10_000}) for i in (1, 2)]
    assert [s.site for s in growing_sites(windows)] == ["cache.py:40"]
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [{"type": "list", "grew": 9, "sampled": 8, "agree": 8,
                              "path": "frame harness.worker.main.Worker.run (main.py:67).workload"
                                      " -> CacheWorkload.cache -> Cache.kept -> list"}]}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    assert "list (+9, 8 of 8 sampled) is held by workload -> CacheWorkload.cache -> " \
           "Cache.kept -> list" in [f.text for f in found]


def test_a_site_names_the_first_caller_outside_its_file() -> None:
    from harness.analysis.attribution import Site, site_caller

    helper = Site("util.py:9", ("util.py:9", "util.py:20", "cache.py:40", "loop.py:1"),
                  1e6, None, 2, 2)
    assert site_caller(helper) == "cache.py:40"
    assert site_caller(Site("cache.py:40", ("cache.py:40",), 1e6, None, 2, 2)) is None


def test_a_lock_leak_names_the_sites_that_locked_the_nodes_still_locked_at_idle() -> None:
    from harness.analysis.attribution import lock_findings

    notes = [{"type": "notes", "t": 20.0, "unreleased_locks": {"nodes": 8, "sites": [
        {"site": "refcache/radix.py:93 (alloc_request)", "nodes": 7},
        {"site": "refcache/radix.py:129 (cache_unfinished_req)", "nodes": 1}]}}]
    [finding] = lock_findings(notes)
    assert finding.text.startswith("8 nodes stay locked with no request running")
    assert "locked at refcache/radix.py:93 (alloc_request) (7 of them)" in finding.text
    assert finding.site == "refcache/radix.py:93 (alloc_request)"
    assert lock_findings([{"unreleased_locks": {}}]) == []


def test_native_growth_beside_a_healthy_caches_python_churn_is_still_named() -> None:
    from harness.analysis.attribution import Site, native_finding

    churn = [Site("cache/keys.py:30", (), 18.7e6, None, 2, 2, 4096.0),
             Site("cache/tree.py:181", (), 17.1e6, None, 2, 2, 4096.0)]
    [finding] = native_finding(52.9e6, churn, budget_per_h=10e6)  # 17 MB/h unexplained
    assert finding.text.startswith("native memory grows ~17.1 MB/h")
    assert native_finding(40e6, churn, budget_per_h=10e6) == []  # 4 MB/h left: within budget


def shmem_run(per_h: float) -> Any:
    run = heap_run(0.0, LEAK_THEN_FILL)  # the healthy churn the windows always see
    t = run.memory["heap"].t
    run.memory["shmem"] = Series(t, np.floor(linear(t, per_h) / 4096) * 4096, "B")
    run.owners = [{"paths": [{"type": "mmap", "grew": 40, "sampled": 8, "agree": 8,
                              "path": "Cache.mappings -> list[39] -> mmap"}]}]
    return run


def test_shared_memory_growth_names_the_mappings_owner_and_no_allocation_site() -> None:
    memory = budgets("heap: 10 MB/h", "shmem: 10 MB/h")
    leak = summarize(shmem_run(200 * MB), memory, calibration=NONE)
    texts = [w["text"] for w in leak.details["where"]]
    assert leak.verdict == "leak"
    assert texts[0].startswith("shared memory grows ~200 MB/h")
    assert "mmap (+40, 8 of 8 sampled) is held by Cache.mappings -> list[39] -> mmap" in texts
    # The heap passed: tracemalloc's sites explain allocations, not shared pages.
    assert not any("cache.py:40" in text for text in texts)
    healthy = summarize(shmem_run(0.0), memory, calibration=NONE)
    assert healthy.verdict == "pass"
    assert [w["kind"] for w in healthy.details["where"]] == ["none"]


def test_a_flat_shared_memory_series_states_a_resolution_of_a_page_per_window() -> None:
    result = summarize(shmem_run(0.0), budgets("shmem: 10 MB/h"), calibration=NONE)
    smallest = result.metrics["shmem_resolution"].value
    assert smallest == pytest.approx(4096 * 3600 / 18.0, rel=0.15)  # a page over the window
    assert any("shmem >= " in reason for reason in result.reasons)


def test_threads_that_grow_are_named_by_the_function_they_run() -> None:
    t = times(20, 10.0)
    run = run_data((t, linear(t, 0.0, base=300 * MB)), warmup_end_s=2.0, loop_end_s=20.0)
    run.memory["threads"] = Series(t, np.floor(t / 2.0) + 3, "")  # one more every 2 s
    run.memory["fds"] = Series(t, np.full(t.size, 9.0), "")
    run.events.append({"type": "event", "name": "resources", "t": 20.0,
                       "threads": [{"what": "Flush.run (cache.py:12)", "count": 10},
                                   {"what": "RssSampler._watch (harness/worker/samplers/"
                                            "rss.py:77)", "count": 1}],  # the harness's own
                       "fds": [{"what": "socket", "count": 2},
                               {"what": "file in /runs/r1", "count": 4}]})  # our own files
    run.header["config"] = {"rundir": "/runs/r1"}
    result = summarize(run, budgets("threads: 100 /h", "fds: 100 /h"), calibration=NONE)
    (finding,) = result.details["where"]
    assert result.verdict == "leak" and finding["signal"] == "threads"
    assert finding["text"].startswith("threads grow ~17")  # 1800 /h, Sen slope of steps
    assert "started and never joined" in finding["text"]
    assert finding["text"].endswith("live threads run: 10 Flush.run (cache.py:12)")
    from harness.analysis.attribution import resource_groups
    census = run.event("resources")
    assert resource_groups(census, "fds", "/runs/r1") == [{"what": "socket", "count": 2}]


def test_native_growth_names_the_native_window_sites_or_says_how_to_get_them() -> None:
    native = [{"type": "native", "t": 12.0, "from_t": 10.0, "ops": 900, "sites": [
        {"native": "_PyObject_Malloc", "python": "cache.py:9 (put)", "bytes": 90_000, "count": 9},
        {"native": "c10::alloc_cpu", "python": "scenarios/workloads/traffic.py:95 (reply)",
         "bytes": 80_000, "count": 9},
        {"native": "c10::alloc_cpu", "python": "cache.py:47 (insert)", "bytes": 50_000,
         "count": 5}]}]
    (named,) = native_finding(500 * MB, [], native_windows=native)
    assert named.text.endswith("native sites still held after a 2.0 s window (memray): "
                               "c10::alloc_cpu from cache.py:47 (insert) (90 MB/h, "
                               "5 allocations)")
    (hint,) = native_finding(500 * MB, [])
    assert hint.text.endswith("native sites: pip install 'leak-harness[native]' (memray) and "
                              "run again")
    blind = [{**native[0], "sites": native[0]["sites"][:2]}]
    (unseen,) = native_finding(500 * MB, [], native_windows=blind)
    assert "bypasses its hooks" in unseen.text


def test_heap_growth_the_native_window_saw_through_pythons_allocator_is_not_native() -> None:
    python_kept = [{"type": "native", "t": 12.0, "from_t": 10.0, "ops": 900, "sites": [
        {"native": "PyObject_Malloc", "python": "service.py:45 (remember)", "bytes": 200_000,
         "count": 50}]}]
    assert native_finding(500 * MB, [], native_windows=python_kept) == []  # 360 MB/h seen
    (named,) = native_finding(900 * MB, [], native_windows=python_kept)  # most not seen
    assert "native memory grows ~900 MB/h" in named.text


def test_stale_request_entries_name_the_table_and_the_exit_paths() -> None:
    from harness.analysis.attribution import stale_findings

    notes = [{"stale_request_entries": {"ongoing_prefetch": {"7": "timeout", "9": "abort-waiting",
                                                             "12": "timeout"}}}]
    (finding,) = stale_findings(notes)
    assert finding.site == "ongoing_prefetch"
    assert "by timeout (2), abort-waiting (1)" in finding.text


def blocks_run(heap_per_h: float, blocks_per_h: float) -> Any:
    """A run whose heap and Python block count grow at the given rates, with sites
    that grow in both windows (as a healthy tree's turnover does)."""
    run = heap_run(heap_per_h, LEAK_THEN_FILL)
    t = run.memory["heap"].t
    run.memory["py_blocks"] = Series(t, linear(t, blocks_per_h, base=1e6), "")
    return run


HEAP_AND_BLOCKS = ("heap: 10 MB/h", "py_blocks: 250000 /h")


def test_window_sites_are_not_named_when_pythons_own_count_is_flat() -> None:
    native = summarize(blocks_run(200 * MB, 0.0), budgets(*HEAP_AND_BLOCKS), calibration=NONE)
    where = native.details["where"]
    assert native.verdict == "leak"
    assert not any("cache.py:40" in w["text"] for w in where)  # turnover, not retention
    [claim] = [w for w in where if w["kind"] == "native"]
    assert claim["text"].startswith("native memory grows ~200 MB/h")
    assert "py_blocks" in claim["text"]


def test_no_native_claim_while_python_grows_without_the_native_windows_word() -> None:
    python = summarize(blocks_run(200 * MB, 50e6), budgets(*HEAP_AND_BLOCKS), calibration=NONE)
    kinds = [w["kind"] for w in python.details["where"]]
    assert python.verdict == "leak"
    assert "native" not in kinds and "python" in kinds


def test_owner_paths_through_the_driver_or_naming_no_holder_are_left_out() -> None:
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [
        {"type": "tuple", "grew": 190, "sampled": 8, "agree": 6,
         "path": "frame harness.worker.main.Worker.run (main.py:67).workload -> "
                 "CacheWorkload.scheduler -> Scheduler.idle_check -> IdleCheck.ledger -> tuple"},
        {"type": "UntypedStorage", "grew": 129, "sampled": 8, "agree": 8,
         "path": "UntypedStorage"},
        {"type": "list", "grew": 40, "sampled": 8, "agree": 8,
         "path": "frame harness.worker.main.Worker.run (main.py:67).workload -> "
                 "CacheWorkload.cache -> Cache.kept -> list"},
    ]}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    owners = [f.text for f in found if f.kind == "owner"]
    assert owners == ["list (+40, 8 of 8 sampled) is held by workload -> CacheWorkload.cache -> "
                      "Cache.kept -> list"]


def test_an_owner_path_whose_holders_each_keep_one_is_not_where_a_type_grew() -> None:
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [
        {"type": "tuple", "grew": 164, "sampled": 8, "agree": 5, "tracked": True, "holds": 0,
         "path": "Cache.lru -> dict[4] -> TreeNode.key -> RadixKey.token_ids -> tuple"},
        {"type": "list", "grew": 372, "sampled": 8, "agree": 6, "tracked": True, "holds": 357,
         "path": "Cache.finished -> dict[7] -> list"},
    ]}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    assert [f.owner for f in found if f.kind == "owner"] == ["Cache.finished -> dict[7] -> list"]


def typed_window(index: int, t: float, types: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    line = window(index, t, {site: 50_000 for site in types})
    line["census_from_t"], line["traced_from_t"] = 4.0, t - 2.0
    for entry in line["sites"]:
        entry["types"] = types[entry["site"]]
    return line


def test_a_site_whose_objects_the_run_does_not_keep_is_turnover_not_a_leak() -> None:
    made = {"tree.py:68": [{"type": "TreeNode", "made": 50, "grew": -3}],  # evicted later
            "cache.py:40": [{"type": "list", "made": 20, "grew": 95}]}  # kept, all of them
    windows = [typed_window(1, 6.0, made), typed_window(2, 14.0, made)]
    [site] = growing_sites(windows)
    assert site.site == "cache.py:40" and site.kept is not None
    assert site.kept.type == "list" and site.kept.share == pytest.approx(95 / (20 * 5))
    from harness.analysis.attribution import site_finding
    assert site_finding(site).text.endswith(
        "; the list objects it makes grew by 95 over 10 s, 95% of what it made")
    few = {"tree.py:68": [{"type": "TreeNode", "made": 5, "grew": 0}]}  # too few to say
    assert [s.site for s in growing_sites([typed_window(1, 6.0, few),
                                           typed_window(2, 14.0, few)])] == ["tree.py:68"]


def test_a_site_making_what_the_explained_cycle_holds_is_the_cycles_not_a_second_culprit(
) -> None:
    made = {"tree.py:68": [{"type": "TreeNode", "made": 50, "grew": 240}],  # kept by records
            "cache.py:40": [{"type": "list", "made": 20, "grew": 95}]}  # kept on its own
    run = heap_run(200 * MB, [typed_window(1, 6.0, made), typed_window(2, 14.0, made)])
    run.garbage_windows = [{"type": "garbage", "t": 10.0, "count": 40, "cycles": [
        {"type": "TreeNode", "path": ["EvictRecord.node", "TreeNode.evict_record"],
         "length": 2, "retained_bytes": 4096, "retained_objects": 6}]}]
    found = where_it_grows(run, budgets("heap: 10 MB/h", "py_blocks: 250000 /h"),
                           [Judgement("leak", "confirmed-growth", "heap"),
                            Judgement("leak", "confirmed-growth", "py_blocks")],
                           {"heap": 200 * MB})
    assert found[0].kind == "cycles" and "EvictRecord.node -> TreeNode" in found[0].text
    assert [f.site for f in found if f.kind == "python"] == ["cache.py:40"]


def test_a_crash_is_named_at_the_innermost_frame_of_the_code_under_test() -> None:
    from harness.analysis.attribution import crash_findings

    traceback = (
        'Traceback (most recent call last):\n'
        '  File "/x/harness/worker/loop.py", line 40, in run\n'
        '  File "/x/scenarios/workloads/scheduler.py", line 200, in _admit\n'
        '  File "/x/refcache/host_backup.py", line 196, in _evict_device_tokens\n'
        '  File "/x/refcache/himamba.py", line 192, in _evict_regular\n'
        'AssertionError: non-leaf, x.id=70\n')
    [crash] = crash_findings({"type": "event", "t": 1.0, "name": "crash", "where": "scenario",
                              "error": "AssertionError: non-leaf, x.id=70",
                              "traceback": traceback})
    assert crash.text == ("the scenario crashed at refcache/himamba.py:192 in _evict_regular "
                          "(called from refcache/host_backup.py:196 in _evict_device_tokens): "
                          "AssertionError: non-leaf, x.id=70")
    assert crash_findings({"type": "event", "t": 1.0, "name": "crash", "where": "harness",
                           "error": "x", "traceback": traceback}) == []
    [closing] = crash_findings({"type": "event", "t": 1.0, "name": "crash", "where": "close",
                                "error": "AssertionError: non-leaf, x.id=70",
                                "traceback": traceback})
    assert closing.kind == "closing" and closing.text.startswith("the end-of-run check failed at")
