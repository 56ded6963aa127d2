"""The pool's idle books: which call allocated the slots they miss, and how their requests left.

From the workload's ``NotesLine`` (``lost_slots``, written by the slot ledger of
``scenarios/workloads/slots.py`` at the last idle moment whose books were
short): per pool, how many slots the books miss, and the lost slots grouped by
the call site that allocated them and the exit path their requests left by.
Books over the pool's size read the other way: the slot ids the cache's tree holds
under two nodes or more (``held_slots()``), which its books count twice.
A cache that does not expose its allocators and the slots it holds
(``pool_allocators()``, ``held_slots()``) has no such note; its books still
judge it, as the broken level of ``idle_pool_mismatch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.analysis.where.common import Finding
from harness.runfiles.records import LostGroup, NotesLine

GROUPS_NAMED = 2  # beside the largest group, the next one's site and path
NO_PATH = ("unknown", "no exit recorded", "no request")  # the ledger could not tell the path


def book_findings(notes: Sequence[NotesLine]) -> list[Finding]:
    """One line per short pool: the count, the allocating site (with its callers) and
    the exit path of the largest group of lost slots, then the next group."""
    found = []
    for record in notes[-1:]:
        for pool in record.get("lost_slots") or []:
            if "twice" in pool:
                found.append(_twice_finding(pool))
                continue
            groups = pool.get("groups") or []
            if not groups:
                continue
            first = groups[0]
            more = "; ".join(_group_text(g) for g in groups[1:GROUPS_NAMED])
            found_n = int(pool.get("found", 0))
            short = int(pool.get("short", 0))
            count = (_slots(short) if found_n == short
                     else f"{_slots(short)} ({found_n} allocated slots neither the cache nor a "
                          f"waiting request holds)")
            why = ("" if first["exit"] in NO_PATH
                   else ": that exit path never frees what the call allocated")
            text = (f"{pool['pool']} pool: {count} lost at idle; {_group_text(first)}{why}"
                    + (f"; also {more}" if more else ""))
            found.append(Finding("books", "idle_pool_mismatch", text, site=str(first["site"]),
                                 stack=tuple(str(s) for s in first.get("stack") or ())))
    return found


def _twice_finding(pool: Mapping[str, Any]) -> Finding:
    """Books over the pool's size, and the tree's double holdings that explain them."""
    text = (f"{pool['pool']} pool: the idle books count {_slots(int(pool['over']))} more than "
            f"the pool has; the tree holds {_slots(int(pool['twice']))} under two nodes or "
            f"more ({int(pool['extra']):,} holdings too many, e.g. slot {pool['example']}), so "
            "evictable + protected count them again and evicting one holder frees what "
            "another still holds")
    return Finding("books", "idle_pool_mismatch", text, owner="the cache's tree (held_slots)")


def _group_text(group: LostGroup) -> str:
    stack = [str(s) for s in group.get("stack") or []]
    caller = f" (called from {stack[1]})" if len(stack) > 1 else ""
    rids = ", ".join(str(r) for r in group.get("requests") or [])
    whose = f" for requests {rids}" if rids else ""
    path = (f" (exit path: {group['exit']})" if group["exit"] in NO_PATH
            else f" that left by {group['exit']}")
    return f"{_slots(int(group['slots']))} allocated at {group['site']}{caller}{whose}{path}"


def _slots(n: int) -> str:
    return f"{n:,} slot" if n == 1 else f"{n:,} slots"
