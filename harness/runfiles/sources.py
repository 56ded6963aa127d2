"""Which sources of "Where it grows" ran in a run, and why each other one did not.

A run's "Where it grows" can only name what its sources saw: a run whose
allocation windows were off (``sampler_unavailable``), skipped
(``attribution_skipped``) or never reached names no allocation site, and the
report must say so rather than list them. Read from the samples alone, so a run
report, the record index and the terminal say the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.runfiles.names import WINDOW_SKIPPED_EVENT
from harness.runfiles.rundata import RunData


@dataclass(frozen=True)
class Source:
    name: str  # as people read it: "tracemalloc's allocation windows"
    ran: bool
    note: str = ""  # why it did not run, or what it missed when it ran in part


# sampler name -> the source's name, in the order "Where it grows" weighs them
SOURCES = (
    ("allocations", "tracemalloc's allocation windows"),
    ("native", "memray's native window"),
    ("heap", "the C heap against Python allocations"),
    ("owners", "owner paths"),
    ("garbage", "explained cycles"),
)


def where_sources(run: RunData) -> list[Source]:
    """Each source of "Where it grows", whether it ran in ``run``, and why not."""
    # A header without its samplers (a hand-made or truncated file) asked for them all.
    configured = run.header.get("config", {}).get("samplers")
    if configured is None:
        configured = [sampler for sampler, _ in SOURCES]
    said: dict[str, str] = {}
    for event in run.events:
        if event.get("name") == "sampler_unavailable":
            said.setdefault(str(event.get("sampler")), str(event.get("reason", "")))
        elif event.get("name") == "sampler_failed":
            said.setdefault(str(event.get("sampler")), f"it failed: {event.get('error', '')}")
    found = []
    for sampler, name in SOURCES:
        if sampler not in configured:
            found.append(Source(name, False, "not asked for (--no-attribution or the config)"))
        elif sampler in said:
            found.append(Source(name, False, said[sampler]))
        else:
            found.append(evidence(sampler, name, run))
    return found


def evidence(sampler: str, name: str, run: RunData) -> Source:
    """Whether a sampler that started left what its source reads."""
    if sampler == "allocations":
        return allocation_windows(name, run)
    if sampler == "native":
        return Source(name, bool(run.native_windows), "" if run.native_windows else
                      "no native window ran (it needs 10 s of run after the warm-up)")
    if sampler == "heap":
        ran = len(run.memory.get("heap", ())) > 0
        return Source(name, ran, "" if ran else "no C heap sample was read")
    if sampler == "owners":
        error = next((str(o["error"]) for o in run.owners if o.get("error")), "")
        ran = bool(run.owners) and not error
        return Source(name, ran, error or ("" if ran else "the run ended before the owner "
                                                       "search (at its end) ran"))
    ran = bool(run.garbage_windows)
    return Source(name, ran, "" if ran else "no garbage window ran before the run ended")


def allocation_windows(name: str, run: RunData) -> Source:
    complete = [w for w in run.alloc_windows if w.get("sites") is not None]
    skipped = [str(e.get("reason", "")) for e in run.events
               if e.get("name") == WINDOW_SKIPPED_EVENT]
    why = f"{len(skipped)} skipped: {skipped[-1]}" if skipped else ""
    if complete:
        return Source(name, True, why)
    return Source(name, False, why or "no window completed before the run ended")


def sources_sentence(sources: Sequence[Source]) -> str:
    """``Sources: a, b. Did not run: c: why.``, naming only the sources that ran as
    sources."""
    ran = [f"{s.name} ({s.note})" if s.note else s.name for s in sources if s.ran]
    off = [f"{s.name}: {s.note}" for s in sources if not s.ran]
    text = f"Sources: {', '.join(ran)}." if ran else "No source of 'Where it grows' ran."
    return text + (f" Did not run: {'; '.join(off)}." if off else "")
