"""Where it grows: a culprit for failing budgets only, from the worker's records.

The entry (harness.analysis.where.where_it_grows): which sources it asks for
which failing budget, and the ranking of what they found.
"""

from __future__ import annotations

import numpy as np

from harness.analysis.verdict import Judgement
from harness.analysis.where import where_it_grows
from harness.analysis.where.sites import growing_sites
from harness.budgets import parse_budget
from tests.analysis.synth import MB, budgets, run_data
from tests.analysis.where.runs import heap_run, typed_window, window


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
