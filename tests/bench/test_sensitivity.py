"""The sensitivity bench's reading of summaries (pure functions; no runs)."""

from __future__ import annotations

from typing import Any

from bench.sensitivity import (
    IDLE_SCENARIO,
    SCENARIO,
    Job,
    judging_metric,
    resolution,
    resolution_cell,
    signals,
)
from bench.zoo.targets import BY_NAME

METRICS: dict[str, dict[str, Any]] = {
    "rss_growth": {"value": 3e8, "unit": "B/h", "ci": [1e8, 5e8]},
    "rss_after_step_growth": {"value": 4e7, "unit": "B/h", "ci": [2e7, 6e7],
                              "budget": "rss: 50 MB/h", "status": "pass"},
    "rss_resolution": {"value": 3.8e8, "unit": "B/h"},
    "heap_growth": {"value": 2e8, "unit": "B/h", "ci": [1.9e8, 2.1e8]},
    "py_blocks_growth": {"value": 5e5, "unit": "/h", "ci": [4e5, 6e5],
                         "resolution_per_h": 1e6},
    "detached_alive_nodes_max": {"value": 16.0, "unit": "",
                                 "budget": "detached_alive_nodes: <= 0", "status": "leak"},
    "tree_nodes_growth": {"value": 1e3, "unit": "/h", "ci": [-1e3, 3e3]},
}


def test_the_metric_that_gave_the_verdict_is_the_one_reported() -> None:
    assert judging_metric(METRICS, "leak")[0] == "detached_alive_nodes_max"
    assert judging_metric(METRICS, "pass")[0] == "rss_after_step_growth"  # the judged RSS fit


def test_signals_are_byte_rates_and_rates_with_a_resolution() -> None:
    assert signals(METRICS) == ["rss", "rss_after_step", "heap", "py_blocks"]


def test_resolution_from_the_field_or_the_metric_else_na() -> None:
    assert resolution(METRICS, "py_blocks") == (1e6, "/h")  # resolution_per_h field
    assert resolution(METRICS, "rss") == (3.8e8, "B/h")  # <signal>_resolution metric
    assert resolution(METRICS, "heap") is None
    assert resolution_cell(METRICS, "heap") == "n/a (±10.0 MB/h)"
    assert resolution_cell(METRICS, "rss") == "380.0 MB/h (±200.0 MB/h)"


def test_byte_leaks_run_at_the_duration_s_target_rate_others_at_their_default() -> None:
    assert Job(BY_NAME["dict_retention"], 20.0, 0).rate == 200e6
    assert Job(BY_NAME["dict_retention"], 60.0, 0).rate == 50e6
    assert Job(BY_NAME["lock_leak"], 20.0, 0).rate == BY_NAME["lock_leak"].default_rate
    assert Job(BY_NAME["slow_leak"], 20.0, 0).scenario() == (SCENARIO, {"cache": {"rate": 10e6}})
    assert Job(BY_NAME["fixed"], 20.0, 0).scenario() == (SCENARIO, {"cache": {}})


def test_the_idle_leak_gets_idle_gaps_from_a_scenario_or_from_load_options() -> None:
    name, options = Job(BY_NAME["idle_leak"], 20.0, 0).scenario()
    assert name == IDLE_SCENARIO or options["load"] == {"pattern": "idle-gaps"}


def test_an_asked_rate_replaces_the_byte_leaks_target_rate_and_names_the_target() -> None:
    from bench.record import Record
    from bench.sensitivity import report_targets

    assert Job(BY_NAME["native_malloc"], 60.0, 0, asked=20e6).rate == 20e6
    assert Job(BY_NAME["lock_leak"], 60.0, 0, asked=20e6).rate == BY_NAME["lock_leak"].default_rate
    rows = [{"target": name, "leaks": True, "unit": "B", "duration_s": 60.0, "rate": 20e6,
             "verdict": verdict, "culprit": "yes"}
            for name, verdict in (("native_malloc", "leak"), ("tensor_views", "suspicious"))]
    rec = Record("scratch", "scratch", {})
    report_targets(rec, rows)
    (first, *_) = rec.targets
    assert first["target"] == "every leak kind at >= 20 MB/h caught (leak) at 60 s"
    assert not first["met"] and first["measured"] == "1/2 kinds caught"


def test_precision_counts_the_culprit_on_the_first_line_and_the_innocent_lines() -> None:
    from bench.sensitivity import first_line_culprit, innocent_lines

    dict_leak, fixed = BY_NAME["dict_retention"], BY_NAME["fixed"]
    where = [
        "bench/zoo/ledger.py:70 (called from bench/zoo/python_leaks.py:39) keeps what it "
        "allocates: +224 MB/h",
        "refcache/keys.py:30 (called from refcache/radix_tree.py:173) keeps what it allocates",
        "tuple (+154) is held by workload -> CacheWorkload.cache -> Cache.lru -> tuple",
        "native memory grows ~42 MB/h: the C heap grows",
    ]
    assert first_line_culprit(dict_leak, where) == "yes"
    assert first_line_culprit(dict_leak, where[1:]) == "no"
    assert innocent_lines(dict_leak, where) == where[1:]  # two wrong leads, a native claim
    assert innocent_lines(BY_NAME["native_malloc"], where[3:]) == []  # native is right there
    assert first_line_culprit(fixed, where) == "-" and len(innocent_lines(fixed, where)) == 3
