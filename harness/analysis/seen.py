"""Whether a run saw what its scenario exists for: work done after the warm-up.

A cache that never admits a request (a storage prefetch that never completes)
or never decodes one (no KV slots for any batch) keeps every memory budget by
doing nothing: its budgets then judge a process that ran no workload, and a
``pass`` would promise what was never tested. So the workload says what a run
must see (its notes' ``expects``: counter gauges and what each counts; the
scenarios' scheduler asks for a request admitted, a decode step, a request
finished and every exit path its load takes, ``scenarios.workloads.common``),
and a counter that did not rise over the measured window makes the run
``error``: the harness could not judge it (exit 3), never ``pass``. A failure
the data confirms anyway (a leak, a crash) keeps its own verdict.

Rule not-seen. At least one of each after the warm-up: the scenarios take
each path many times a second, so a healthy run of any length the harness
accepts sees them all. False negatives: a cache that admits a handful of
requests and then stops admitting passes the rule (its budgets then judge
little; the gauges plot shows it). A workload that declares nothing (a
recorded program, a scenario of plain Python) is not judged by this rule.
"""

from __future__ import annotations

import numpy as np

from harness.analysis.verdict import Judgement
from harness.runfiles.names import THREAD_DIED_EVENT
from harness.runfiles.rundata import RunData, Series
from harness.units import format_duration

SEEN_RULE = "not-seen"
# The notes' record of a load's feature not run on this cache, and how the reasons say it.
NOT_TAKEN = (
    ("overlap_not_taken", "overlap scheduling not run"),
    ("sessions_not_taken", "streaming sessions not run"),
    ("disagg_not_taken", "disaggregated prefill and decode not run"),
    ("speculation_not_taken", "speculative decoding not run"),
    ("bigram_keys_not_taken", "bigram keys not taken"),
)
# The scheduler's gauges that say why nothing happened (requests waiting, pools full).
CONTEXT = ("waiting", "running", "cached_tokens", "alloc_failures", "dropped")


def expected(run: RunData) -> dict[str, str]:
    """Counter gauge -> what it counts, as the workload declared it (empty: nothing)."""
    for record in reversed(run.notes):
        expects = record.get("expects")
        if isinstance(expects, dict):
            return {str(name): str(what) for name, what in expects.items()}
    return {}


def judge_seen(run: RunData, start_s: float, end_s: float, scenario: str) -> Judgement | None:
    """``error`` naming each declared counter that did not rise from ``start_s`` to
    ``end_s`` (the measured window), or None when every one did (or none is declared)."""
    expects = expected(run)
    missing = [name for name in expects if rise(run.gauges.get(name), start_s, end_s) < 1]
    if not missing:
        return None
    what = _listed([expects[name] for name in missing])
    flat = _listed(missing, "and")
    name = scenario if scenario != "*" else "its scenario"
    window = format_duration(max(end_s - start_s, 0.0))
    reason = (f"the run did not do what {name} exists for: over the {window} measured after "
              f"its warm-up it saw no {what} ({flat} did not rise), so its budgets judged a "
              f"cache that did not do that work and it cannot pass{_context(run, end_s)}.")
    return Judgement("error", SEEN_RULE, reason)


def rise(series: Series | None, start_s: float, end_s: float) -> float:
    """How much a counter rose over the window: its last value by ``end_s`` less its
    value at ``start_s`` (the last sample at or before it, else the window's first)."""
    if series is None or not end_s > start_s:
        return 0.0
    upto = series.t <= end_s
    if not np.any(upto & (series.t > start_s)):
        return 0.0
    before = np.flatnonzero(series.t <= start_s)
    first = float(series.v[before[-1]]) if before.size else float(series.v[upto][0])
    return float(series.v[upto][-1]) - first


def not_taken(run: RunData) -> list[str]:
    """Sentences for the paths the load asked for that the cache could not take (it
    lacks the call), and for what the target says it does not drive, from the
    workload's notes: said, not judged."""
    sentences = []
    for record in run.notes[-1:]:
        paths = record.get("exit_paths_not_taken") or {}
        by_reason: dict[str, list[str]] = {}
        for path, why in paths.items():
            by_reason.setdefault(str(why), []).append(str(path))
        for why, names in by_reason.items():
            sentences.append(f"exit paths not taken: {_listed(names, 'and')} ({why}).")
        for key, words in NOT_TAKEN:  # a load's feature the cache lacks the calls for
            reason = record.get(key)
            if reason:
                sentences.append(f"{words}: {reason}.")
        sentences += [f"the target says: {line.rstrip('.')}." for line in
                      record.get("target_notes") or ()]
    return sentences


def _context(run: RunData, end_s: float) -> str:
    """The scheduler's last gauges and every exit path that was taken, as a clause."""
    shown = []
    for name in [*CONTEXT, *sorted(n for n in run.gauges if n.startswith("exits_"))]:
        series = run.gauges.get(name)
        if series is None or not len(series):
            continue
        upto = series.v[series.t <= end_s]
        value = float(upto[-1]) if upto.size else float(series.v[0])
        if name in CONTEXT or value > 0:
            shown.append(f"{name} {value:,.0f}")
    return f"; the scheduler's last gauges: {', '.join(shown)}" if shown else ""


def _listed(items: list[str], last: str = "or") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


THREAD_RULE = "thread-died"


def judge_threads(run: RunData) -> Judgement | None:
    """``suspicious`` when a thread of the code under test died of an uncaught exception
    (rule thread-died), else None. The run went on without it: the work that thread was
    to do (a prefetch, a write-back) never finished, so the budgets judged a cache that
    did not run as written, and it cannot pass. A leak the data confirms keeps its own
    verdict; "Where it grows" names the site (:func:`.where.process.thread_findings`).
    False negatives: a thread whose target catches every exception itself never dies."""
    died = [e for e in run.events if e.get("name") == THREAD_DIED_EVENT]
    if not died:
        return None
    names = sorted({str(e.get("thread", "unnamed")) for e in died})
    what = f"{len(died)} thread{'s' if len(died) > 1 else ''} ({', '.join(names[:3])})"
    reason = (f"{what} of the run died of an uncaught exception, the first at "
              f"{float(died[0]['t']):.1f} s ({died[0].get('error', 'an error')}): the run went "
              f"on without what it was doing, so it cannot pass (worker.log has the traceback).")
    return Judgement("suspicious", THREAD_RULE, reason)
