"""A run that did not do what its scenario exists for is never ``pass``: rule not-seen."""

from __future__ import annotations

import numpy as np

from harness.analysis.seen import judge_seen, not_taken, rise
from harness.analysis.summary import summarize
from harness.runfiles.rundata import RunData, Series
from tests.analysis.synth import budgets, run_data, times

EXPECTS = {"admitted": "requests admitted", "decoded": "decode steps",
           "exits_timeout": "waiting requests timed out"}


def counting(rising: set[str], flat_at: float = 0.0, seconds: float = 10.0) -> RunData:
    """A healthy, flat RSS; the declared counters rise (``rising``) or stay at ``flat_at``."""
    t = times(seconds, 10.0)
    gauges = {name: (t, t * 50.0 if name in rising else np.full(t.size, flat_at))
              for name in EXPECTS}
    gauges["waiting"] = (t, np.full(t.size, 24.0))
    run = run_data((t, np.full(t.size, 2e8)), gauges=gauges, warmup_end_s=2.0,
                   loop_end_s=seconds)
    run.notes.append({"type": "notes", "t": seconds, "expects": dict(EXPECTS)})
    run.header["config"] = {"scenario": "radix-exits"}
    return run


def test_a_run_that_admitted_nothing_is_error_and_says_what_it_did_not_see() -> None:
    analysis = summarize(counting({"exits_timeout"}), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "error"
    first = analysis.reasons[0]
    assert first.startswith("the run did not do what radix-exits exists for: over the 7.9s "
                            "measured "
                            "after its warm-up it saw no requests admitted or decode steps "
                            "(admitted and decoded did not rise)")
    assert "waiting 24" in first and "exits_timeout" in first
    assert [f.text for f in analysis.details.where] == [
        "nothing is blamed: the run did not do the work its scenario exists for (see its "
        "reasons)"]


def test_a_run_that_saw_every_declared_counter_rise_passes() -> None:
    analysis = summarize(counting(set(EXPECTS)), budgets("rss: 50 MB/h"))
    assert analysis.verdict == "pass", analysis.reasons


def test_counters_that_rose_only_during_the_warm_up_were_not_seen() -> None:
    """A cache that admitted while warming up and then stopped judged nothing after it."""
    run = counting(set(EXPECTS))
    for name in EXPECTS:
        series = run.gauges[name]
        run.gauges[name] = Series(series.t, np.minimum(series.v, 60.0))  # flat from 1.2 s
    assert summarize(run, budgets("rss: 50 MB/h")).verdict == "error"


def test_a_confirmed_leak_stays_a_leak_and_a_crash_its_own_ending() -> None:
    run = counting(set(), seconds=20.0)  # long enough for growth to convict (short-run)
    t = run.rss.t
    run.rss = Series(t, 2e8 + 50e9 / 3600.0 * t, "B")
    assert summarize(run, budgets("rss: 50 MB/h")).verdict == "leak"
    crashed = summarize(counting(set()), budgets("rss: 50 MB/h"), outcome="crashed",
                        outcome_reason="the scenario raised: boom.")
    assert crashed.verdict == "crashed"
    assert not any("exists for" in reason for reason in crashed.reasons)


def test_a_workload_that_declares_nothing_is_not_judged_by_the_rule() -> None:
    run = counting(set())
    run.notes.clear()
    assert summarize(run, budgets("rss: 50 MB/h")).verdict == "pass"
    assert judge_seen(run, 2.0, 10.0, "x") is None


def test_rise_reads_the_counter_from_the_window_start_to_its_end() -> None:
    t = np.arange(10.0)
    series = Series(t, np.array([0, 0, 5, 5, 5, 5, 7, 7, 9, 9], dtype=float))
    assert rise(series, 2.0, 7.0) == 2.0  # 5 at 2 s, 7 at 7 s
    assert rise(series, 2.5, 5.0) == 0.0
    assert rise(series, 8.5, 12.0) == 0.0  # no sample after the start
    assert rise(None, 0.0, 9.0) == 0.0


def test_paths_the_cache_cannot_take_are_said_not_judged() -> None:
    run = counting(set(EXPECTS))
    run.notes.append({"type": "notes", "t": 10.0, "expects": dict(EXPECTS),
                      "exit_paths_not_taken": {
                          "abort-waiting": "the cache has no release_aborted_request(req)",
                          "timeout": "the cache has no release_aborted_request(req)"},
                      "overlap_not_taken": "the cache has no alloc_tokens(n)",
                      "sessions_not_taken": "the cache has no open_session(session_id)"})
    assert not_taken(run) == [
        "exit paths not taken: abort-waiting and timeout (the cache has no "
        "release_aborted_request(req)).",
        "overlap scheduling not run: the cache has no alloc_tokens(n).",
        "streaming sessions not run: the cache has no open_session(session_id)."]
    analysis = summarize(run, budgets("rss: 50 MB/h"))
    assert analysis.verdict == "pass" and analysis.reasons[-3:] == not_taken(run)


def test_speculation_and_bigram_keys_not_taken_are_said() -> None:
    run = counting(set(EXPECTS))
    run.notes.append({"type": "notes", "t": 10.0, "expects": dict(EXPECTS),
                      "speculation_not_taken": "the cache has no reject_draft_tokens(req, n)",
                      "bigram_keys_not_taken": "uses_bigram_keys() missing"})
    assert not_taken(run) == [
        "speculative decoding not run: the cache has no reject_draft_tokens(req, n).",
        "bigram keys not taken: uses_bigram_keys() missing."]


def test_what_a_target_says_it_does_not_drive_is_in_the_reasons() -> None:
    run = counting(set(EXPECTS))
    run.notes.append({"type": "notes", "t": 10.0, "expects": dict(EXPECTS),
                      "target_notes": ["check_prefetch_progress: this cache has none."]})
    assert not_taken(run) == ["the target says: check_prefetch_progress: this cache has none."]
