"""A crash, locks, stale tables and resources (harness.analysis.where.process)."""

from __future__ import annotations

import numpy as np

from harness.analysis.summary import summarize
from harness.analysis.where.process import (
    crash_findings,
    lock_findings,
    resource_groups,
    stale_findings,
    thread_findings,
)
from harness.runfiles.rundata import Series
from tests.analysis.synth import MB, budgets, linear, run_data, times
from tests.analysis.where.runs import NONE, where_of


def test_a_lock_leak_names_the_sites_that_locked_the_nodes_still_locked_at_idle() -> None:
    notes = [{"type": "notes", "t": 20.0, "unreleased_locks": {"nodes": 8, "sites": [
        {"site": "refcache/radix.py:93 (alloc_request)", "nodes": 7},
        {"site": "refcache/radix.py:129 (cache_unfinished_req)", "nodes": 1}]}}]
    [finding] = lock_findings(notes)
    assert finding.text.startswith("8 nodes stay locked with no request running")
    assert "locked at refcache/radix.py:93 (alloc_request) (7 of them)" in finding.text
    assert finding.site == "refcache/radix.py:93 (alloc_request)"
    assert lock_findings([{"unreleased_locks": {}}]) == []


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
    (finding,) = where_of(result)
    assert result.verdict == "leak" and finding["signal"] == "threads"
    assert finding["text"].startswith("threads grow ~1,7")  # 1800 /h, Sen slope of steps
    assert "started and never joined" in finding["text"]
    assert finding["text"].endswith("live threads run: 10 Flush.run (cache.py:12)")
    census = run.event("resources")
    assert resource_groups(census, "fds", "/runs/r1") == [{"what": "socket", "count": 2}]


def test_stale_request_entries_name_the_table_and_the_exit_paths() -> None:
    notes = [{"stale_request_entries": {"ongoing_prefetch": {"7": "timeout", "9": "abort-waiting",
                                                             "12": "timeout"}}}]
    (finding,) = stale_findings(notes)
    assert finding.site == "ongoing_prefetch"
    assert "by timeout (2), abort-waiting (1)" in finding.text


def test_a_crash_is_named_at_the_innermost_frame_of_the_code_under_test() -> None:
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


STORAGE_THREAD_DIED = (
    'Traceback (most recent call last):\n'
    '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner\n'
    '  File "/x/site/sglang/srt/managers/cache_controller.py", line 960, in '
    'prefetch_io_aux_func\n'
    '  File "/x/site/sglang/srt/managers/cache_controller.py", line 915, in _generic_page_get\n'
    'IndexError: index 25 is out of bounds for dimension 0 with size 25\n')


def died(t: float, thread: str = "Thread-3 (run)") -> dict[str, object]:
    return {"type": "event", "t": t, "name": "thread_died", "thread": thread,
            "error": "IndexError: index 25 is out of bounds for dimension 0 with size 25",
            "traceback": STORAGE_THREAD_DIED}


def test_a_thread_that_died_is_named_at_its_site_and_the_run_cannot_pass() -> None:
    t = times(20, 10.0)
    run = run_data((t, np.full(t.size, 300 * MB)), warmup_end_s=2.0, loop_end_s=20.0)
    run.events += [died(10.1), died(11.6, "Thread-6 (run)")]  # type: ignore[list-item]
    analysis = summarize(run, budgets("rss: 50 MB/h"))
    assert analysis.verdict == "suspicious"  # flat memory: no leak, but not a clean run
    assert analysis.reasons[0].startswith(
        "2 threads (Thread-3 (run), Thread-6 (run)) of the run died of an uncaught exception, "
        "the first at 10.1 s (IndexError: index 25 is out of bounds")
    [line] = where_of(analysis)
    assert line["kind"] == "thread"
    assert line["site"] == "managers/cache_controller.py:915 in _generic_page_get"
    assert str(line["text"]).startswith(
        "a thread of the code under test (Thread-3 (run)) died at managers/cache_controller.py:915 "
        "in _generic_page_get (called from managers/cache_controller.py:960 in "
        "prefetch_io_aux_func): "
        "IndexError")
    assert "2 threads died there" in str(line["text"])


def test_a_harness_thread_that_died_blames_no_code_under_test() -> None:
    harness_only = {**died(3.0), "traceback": (
        'Traceback (most recent call last):\n'
        '  File "/x/harness/worker/samplers/rss.py", line 77, in _watch\n'
        'OSError: gone\n')}
    assert thread_findings([harness_only]) == []  # type: ignore[list-item]
