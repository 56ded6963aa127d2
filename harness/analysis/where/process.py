"""The process's own records: a crash, the workload's notes and the resource census.

From the worker's events (``EventLine``: the ``crash`` event's traceback, the
``resources`` census at stop) and the workload's ``NotesLine``: where the
scenario raised, the locks still held at idle, per-request table entries of
requests that have left, slots still in transfer after a quiet stretch, and the
threads or descriptors that grow with what they run or point at.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from harness.analysis.verdict import Judgement
from harness.analysis.where.common import Finding
from harness.runfiles.names import THREAD_DIED_EVENT
from harness.runfiles.records import EventLine, NotesLine, ResourceGroup
from harness.runfiles.rundata import RunData
from harness.units import format_rate

FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# Frames that are the harness's or the interpreter's, not the code under test.
NOT_UNDER_TEST = ("/harness/", "/scenarios/workloads/", "/lib/python3", "<frozen ")
TESTS = "/tests/"  # a project's tests (the harness's own fixtures too) are code under test


def under_test(path: str) -> bool:
    """Whether a traceback's frame is the code under test's, not the harness's or Python's."""
    return TESTS in path or not any(part in path for part in NOT_UNDER_TEST)


def raised_at(traceback: str) -> tuple[str, str] | None:
    """The innermost frame of the code under test in ``traceback`` and, when there is
    one, its caller as " (called from ...)"; None when no frame is the code's."""
    frames = [(path, int(line), func) for path, line, func in FRAME.findall(traceback)]
    mine = [f for f in frames if under_test(f[0])]
    if not mine:
        return None
    caller = f" (called from {frame_text(mine[-2])})" if len(mine) > 1 else ""
    return frame_text(mine[-1]), caller


def crash_findings(crash: EventLine | None) -> list[Finding]:
    """Where the scenario raised: the innermost frame of the code under test, its caller
    and the exception, from the worker's ``crash`` event."""
    if crash is None or crash.get("where") == "harness":
        return []
    found = raised_at(str(crash.get("traceback") or ""))
    if found is None:
        return []
    site, caller = found
    error = crash.get("error", "an error")
    if crash.get("where") == "close":  # the workload's own check once the loop was over
        text = f"the end-of-run check failed at {site}{caller}: {error}"
        return [Finding("closing", "crash", text, site=site)]
    text = f"the scenario crashed at {site}{caller}: {error}"
    return [Finding("crash", "crash", text, site=site)]


def thread_findings(events: Sequence[EventLine]) -> list[Finding]:
    """Threads of the code under test that died of an uncaught exception (the worker's
    ``thread_died`` events), one line per site: whatever such a thread was to finish or
    give back stays held, which is how the slots it held show in the books."""
    by_site: dict[tuple[str, str], list[EventLine]] = {}
    for event in events:
        found = raised_at(str(event.get("traceback") or ""))
        if event.get("name") == THREAD_DIED_EVENT and found is not None:
            by_site.setdefault(found, []).append(event)  # None: a harness thread's
    findings = []
    for (site, caller), died in by_site.items():
        first = died[0]
        more = f"; {len(died)} threads died there" if len(died) > 1 else ""
        text = (f"a thread of the code under test ({first.get('thread', 'unnamed')}) died at "
                f"{site}{caller}: {first.get('error', 'an error')}, at {float(first['t']):.1f} s"
                f"{more}; what it was to finish or give back stays held")
        findings.append(Finding("thread", "thread_died", text, site=site))
    return findings


def frame_text(frame: tuple[str, int, str]) -> str:
    path, line, func = frame
    return f"{short_path(path)}:{line} in {func}"


def short_path(path: str) -> str:
    """A source path as people read it: under the current folder or a site-packages."""
    if "/site-packages/" in path:
        return path.rsplit("/site-packages/", 1)[1]
    here = os.getcwd() + os.sep
    return path[len(here):] if path.startswith(here) else "/".join(path.split("/")[-2:])


def lock_findings(notes: Sequence[NotesLine]) -> list[Finding]:
    """The locks still held with no request running, and where they were taken."""
    found = []
    for record in notes[-1:]:
        locks = record.get("unreleased_locks")
        sites = (locks.get("sites") if locks else None) or []
        if locks is None or not locks.get("nodes") or not sites:
            continue
        where = ", ".join(f"{s['site']} ({s['nodes']} of them)" for s in sites)
        text = (
            f"{locks['nodes']} nodes stay locked with no request running (locked, never "
            f"unlocked: a missing dec_lock_ref); they were locked at {where}"
        )
        found.append(Finding("locks", "locked_while_idle", text, site=str(sites[0]["site"])))
    return found


def transfer_findings(notes: Sequence[NotesLine]) -> list[Finding]:
    """Slots the books still count as in transfer after a quiet stretch (the workload's
    ``held_in_transfer`` note): a copy whose acknowledgement never came holds them; and
    copies a lock for work in flight still holds: a lock no path released."""
    found = []
    for record in notes[-1:]:
        held = record.get("held_in_transfer")
        if held is None:
            continue
        stretch = (f"after a quiet stretch of {held['rounds']} event rounds "
                   f"({held['seconds']} s) with nothing running or waiting")
        for pool, slots in held["pools"].items():
            text = (f"{pool} pool: {int(slots):,} slots still in transfer {stretch}: a copy "
                    "never acknowledged holds them (the books excuse in-transfer slots, so "
                    "no other check sees them)")
            found.append(Finding("locks", "held_in_transfer", text, site=f"{pool} pool"))
        for pool, slots in held.get("locked", {}).items():
            text = (f"{pool} pool: {int(slots):,} slots of the tree's copies still locked "
                    f"{stretch}: a lock taken for a backup, load back or prefetch was never "
                    "released (a missing host-lock release), so they can never be evicted")
            found.append(Finding("locks", "held_in_transfer", text, site=f"{pool} pool"))
    return found


def stale_findings(notes: Sequence[NotesLine]) -> list[Finding]:
    """Per-request table entries of requests that have left, and the path each left by."""
    found = []
    for record in notes[-1:]:
        for table, entries in (record.get("stale_request_entries") or {}).items():
            paths = Counter(str(path) for path in entries.values())
            how = ", ".join(f"{path} ({n})" for path, n in paths.most_common())
            text = (f"{table} keeps entries of requests that have left (by {how}): "
                    f"that exit path never gives back what the entry holds")
            found.append(Finding("table", "stale_request_entries", text, site=str(table)))
    return found


RESOURCE_WORDS = {
    "threads": ("threads", "live threads run",
                "started and never joined (a thread per unit of work)"),
    "fds": ("open file descriptors", "open descriptors are", "opened and never closed"),
}


def resource_findings(
    run: RunData, failing: Mapping[str, Judgement], rates: Mapping[str, float]
) -> list[Finding]:
    """Threads or descriptors that grow, with what they run or point at (the census at stop)."""
    census = run.event("resources")
    found = []
    for signal, (noun, groups_are, cause) in RESOURCE_WORDS.items():
        if signal not in failing:
            continue
        groups = resource_groups(census, signal, own_folder(run))
        held = "; ".join(f"{g['count']} {g['what']}" for g in groups) or "no census was taken"
        rate = rates.get(signal)
        grows = f"grow ~{format_rate(rate, '/h')}" if rate is not None else "grow"
        text = f"{noun} {grows}, {cause}; at the end {groups_are}: {held}"
        site = str(groups[0]["what"]) if groups else None
        found.append(Finding("resources", signal, text, site=site, per_h=rate))
    return found


def resource_groups(census: EventLine | None, signal: str,
                    rundir: str | None = None) -> list[ResourceGroup]:
    """The census's groups of threads or of descriptors (empty without a census), less
    the harness's own: its sampler threads and the files it writes in the run folder."""
    if census is None:
        return []
    groups = (census.get("threads") if signal == "threads" else census.get("fds")) or []
    return [g for g in groups if "harness/worker/" not in str(g.get("what", ""))
            # a relative run folder ends the absolute path the census read
            and not (rundir and str(g.get("what", "")).endswith(rundir))]


def own_folder(run: RunData) -> str | None:
    """The run folder, where the harness's own open files are."""
    folder = run.header.get("config", {}).get("rundir")
    return str(folder).rstrip("/").removeprefix("./") if folder else None
