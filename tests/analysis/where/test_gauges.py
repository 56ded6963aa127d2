"""A broken level names the object behind its gauge; the books name the lost slots' site."""

from __future__ import annotations

from typing import cast

from harness.analysis.where import Finding, gauge_finding, ranked
from harness.analysis.where.books import book_findings
from harness.runfiles.records import NotesLine

HOLDER = "workload -> CacheWorkload.cache -> HiRadixCache.pp -> PPSync.work_list"
PATH = f"{HOLDER} -> list[1113] -> Work"
REASON = "work_list held 762 for 3+ samples, over 'work_list: <= 4'."


def test_a_level_names_the_holder_an_owner_path_runs_through() -> None:
    owner = Finding("owner", "objects", f"Work (+1114) is held by {PATH}", owner=PATH)
    found = gauge_finding("work_list", REASON, [owner])
    assert found.kind == "gauge" and found.site == "PPSync.work_list"
    assert found.owner == HOLDER
    assert found.text.startswith("work_list held 762") and "Work (+1114)" in found.text
    assert ranked([owner, found])[0] is found


def test_a_level_no_owner_path_explains_stays_a_level() -> None:
    owner = Finding("owner", "objects", "dict (+9) is held by Cache.table", owner="Cache.table")
    assert gauge_finding("work_list", REASON, [owner]) == Finding("level", "work_list", REASON)


def test_the_books_line_leads_and_names_pool_count_site_and_path() -> None:
    notes = [cast(NotesLine, {"type": "notes", "t": 1.0, "lost_slots": [{
        "pool": "full", "short": 1, "found": 1, "groups": [{
            "site": "refcache/radix.py:89 in alloc_tokens",
            "stack": ["refcache/radix.py:89 in alloc_tokens"], "exit": "retract",
            "slots": 1, "requests": ["15"]}]}]})]
    [books] = book_findings(notes)
    assert books.text.startswith("full pool: 1 slot lost at idle; 1 slot allocated at "
                                 "refcache/radix.py:89 in alloc_tokens for requests 15 that "
                                 "left by retract")
    crash = Finding("crash", "crash", "the scenario crashed at x.py:1 in f: E")
    level = Finding("level", "idle_pool_mismatch", "idle_pool_mismatch held 1")
    assert ranked([level, crash, books])[0] is books
