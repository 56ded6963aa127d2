"""Where it grows: the site, the owner and the signal behind each failing budget.

Pure, like the rest of the analysis: it reads what the worker recorded and
names a culprit only for budgets that failed (``leak``) or nearly did
(``suspicious``). Its sources, one module each, each blind to something:

- allocation windows (tracemalloc, :mod:`.sites`): the source line whose
  retained Python allocations grow; a site counts only if it grows in every
  complete window, so a structure that was still filling in the first window
  and stopped is not blamed;
- owner paths (:mod:`.holders`; the owners sampler's own backward search over
  ``gc.get_referrers``, :mod:`harness.worker.heapgraph.search`, at the end of
  the run): what keeps a sample of the most-grown type alive, from a module or
  a long-lived object;
- the C heap against Python allocations (:mod:`.native`): heap growth that no
  Python site accounts for is native (malloc from C code, tensor data, a C
  extension);
- resident shared memory (:mod:`.native`): pages mapped outside malloc and
  pymalloc (``mmap(-1, n)``, shared memory), which no allocation window sees;
- explained cycles (:mod:`.holders`): for cyclic garbage, the cycle with its
  attribute names;
- the process's own records (:mod:`.process`): a crash, the workload's notes
  (a lock never released, per-request tables of requests that left) and the
  threads or descriptors it holds;
- the pool's idle books (:mod:`.books`): for slots they miss, the call site that
  allocated them and the exit path their requests left by (the slot ledger's note);
- level budgets on gauges (a lock never released, accounting that does not
  add up at idle): the gauge and what it held.

What they share (the :class:`Finding`, the :class:`Site`) is in :mod:`.common`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.analysis.verdict import Judgement
from harness.analysis.where.books import book_findings
from harness.analysis.where.common import Finding, Kept, Site
from harness.analysis.where.holders import (
    cycle_findings,
    cycle_members,
    owner_findings,
    tensor_findings,
)
from harness.analysis.where.native import native_finding, shmem_finding
from harness.analysis.where.process import (
    crash_findings,
    lock_findings,
    resource_findings,
    stale_findings,
    thread_findings,
    transfer_findings,
)
from harness.analysis.where.site_holders import with_holder
from harness.analysis.where.sites import growing_sites, site_finding
from harness.budgets import Budget
from harness.runfiles.rundata import RunData

__all__ = ["CERTAINTY", "Finding", "Kept", "Site", "gauge_finding", "python_grows", "ranked",
           "where_it_grows"]

FAILING = ("leak", "suspicious")
DETACHED = "detached"  # a gauge of nodes detached from the tree but alive
GAUGE_SUFFIXES = ("_len", "_length", "_size", "_count", "_entries")  # a gauge of a container
ALLOCATED_SIGNALS = ("heap", "py_blocks", "rss", "uss")  # growth allocation windows can explain


def where_it_grows(
    run: RunData, budgets: Sequence[Budget], judgements: Sequence[Judgement],
    rates: Mapping[str, float],
) -> list[Finding]:
    """The findings for the failing budgets; ``rates``: judged growth per hour by series."""
    failing = {b.metric: j for b, j in zip(budgets, judgements, strict=True) if j.status in FAILING}
    # A crash and a thread that died are named whatever the budgets say.
    found: list[Finding] = crash_findings(run.event("crash")) + thread_findings(run.events)
    if not failing:
        return found
    if "stale_request_entries" in failing:  # a named table and exit path: the most certain
        found += stale_findings(run.notes)
    sites = growing_sites(run.alloc_windows)
    python = python_grows(budgets, judgements)
    # Allocation windows see what goes through Python's and C's allocators;
    # shared mappings bypass both, so only the owner search can find their holders.
    allocated_failing = any(name in failing for name in ALLOCATED_SIGNALS)
    bytes_failing = allocated_failing or "shmem" in failing
    if allocated_failing:
        # A window traces from its own start, so a site of the healthy code's turnover
        # (a node evicted a minute later) grows in every window too. Only Python's own
        # block count, over the whole run, tells retention from turnover: flat, and
        # whatever a window saw growing was replaced, not kept.
        if python is not False:
            members = cycle_members(run.garbage_windows)
            # What a site makes that the explained cycle holds is the cycle's: named once,
            # by the cycle and its attributes (a line naming the tree code that made the
            # nodes an evicted record keeps would send the reader to the tree).
            found += [with_holder(site_finding(s), s.site, run.alloc_windows) for s in sites
                      if s.kept is None or s.kept.type not in members]
        # Native memory only on a confirmed heap leak: a suspicious heap (a sawtooth whose
        # last tooth the run ended in) is too weak to send anyone to native stacks.
        if "heap" in failing and failing["heap"].status == "leak":
            limit = next((b.limit for b in budgets if b.metric == "heap" and b.kind == "rate"
                          and b.per == "h"), None)
            found += native_finding(rates.get("heap"), sites, traced=bool(run.alloc_windows),
                                    budget_per_h=limit, native_windows=run.native_windows,
                                    python=python)
    if "shmem" in failing:
        found += shmem_finding(rates.get("shmem"))
    if bytes_failing or "tensor_pinned" in failing:
        found += tensor_findings(run.owners)
    if bytes_failing:
        found += owner_findings(run.owners)
    # Detached nodes alive are what a cycle keeps (seed incident 1): its path says who.
    # So is a cycle that holds what a growing site makes (that site is the cycle's).
    cycles_grow = ("cyclic_garbage" in failing or any(DETACHED in m for m in failing)
                   or (bytes_failing and any(s.kept is not None and s.kept.type in
                                             cycle_members(run.garbage_windows) for s in sites)))
    incidental: list[Finding] = []
    if cycles_grow:
        found += cycle_findings(run.garbage_windows)
    elif bytes_failing:  # a cycle the garbage windows saw, which no growing budget blames
        incidental = cycle_findings(run.garbage_windows)
    found += resource_findings(run, failing, rates)
    if "locked_while_idle" in failing:
        found += lock_findings(run.notes)
    if "held_in_transfer" in failing:  # the pool, and how long nothing else ran
        found += transfer_findings(run.notes)
    if "idle_pool_mismatch" in failing:  # the pool, the allocating site and the exit path
        found += book_findings(run.notes)
    owners = [f for f in found if f.kind == "owner" and f.owner]
    for budget, judgement in zip(budgets, judgements, strict=True):
        if judgement.status in FAILING and budget.kind == "level":
            found.append(gauge_finding(budget.metric, judgement.reason, owners))
    return after_sites(ranked(found), incidental)


def gauge_finding(metric: str, reason: str, owners: Sequence[Finding]) -> Finding:
    """A broken level, with the object behind the gauge when an owner path runs through
    an attribute of the gauge's name (``work_list`` -> ``PPSync.work_list``): the holder
    path and what it holds. Else the level alone."""
    names = {metric, *(metric.removesuffix(s) for s in GAUGE_SUFFIXES)}
    for owner in owners:
        path = str(owner.owner)
        hops = [hop.strip() for hop in path.split("->")]
        at = next((i for i, hop in enumerate(hops) if hop.rpartition(".")[2] in names
                   and "." in hop), None)
        if at is None:
            continue
        holder = " -> ".join(hops[:at + 1])
        held = owner.text.partition(" is held by ")[0]
        text = (f"{reason.rstrip('.')}: the gauge counts {hops[at]}, held by {holder} "
                f"(it holds {' -> '.join(hops[at + 1:]) or 'them'}; {held})")
        return Finding("gauge", metric, text, site=hops[at], owner=holder)
    return Finding("level", metric, reason)


# Most certain first: the site that allocated the slots the idle books miss, a crash site
# or the site a thread of the code under test died at (what it held stays held),
# a named table or lock says what is wrong by itself
# (a crash in the workload's end-of-run check, "closing", is a consequence: after the
# books that showed the leak while it ran);
# a cycle or a view names the attribute; a broken level whose gauge an owner path
# explains names its holder, which a bare broken level (a gauge) does not; a
# site or an owner path is one sample of the growth; a native claim is what is left
# when nothing else explains it.
CERTAINTY = ("books", "crash", "thread", "table", "locks", "cycles", "tensors", "gauge", "level",
             "closing", "resources", "shared", "python", "owner", "native", "heap")


def ranked(found: Sequence[Finding]) -> list[Finding]:
    """The findings, most certain kind first (stable within a kind)."""
    order = {kind: i for i, kind in enumerate(CERTAINTY)}
    return sorted(found, key=lambda f: order.get(f.kind, len(order)))


def after_sites(ordered: list[Finding], incidental: Sequence[Finding]) -> list[Finding]:
    """``incidental`` cycles behind the Python sites: bytes grow, cyclic garbage is not
    judged growing, and a site that kept more in every allocation window says more (a
    service's 2 multiprocessing cycles came before the dict that kept every request).
    Without a Python site they come last: what the growing budgets found (an owner path,
    native memory) says more than a cycle none of them blames (a recorded program that
    kept 1 MB/s led with 2 cycles of ``datetime``'s own objects)."""
    if not incidental:
        return ordered
    at = max((i + 1 for i, f in enumerate(ordered) if f.kind == "python"), default=None)
    if at is None:
        return [*ordered, *incidental]
    return [*ordered[:at], *incidental, *ordered[at:]]


def python_grows(budgets: Sequence[Budget], judgements: Sequence[Judgement]) -> bool | None:
    """Whether Python's own count of its allocations (``py_blocks``) grows over the run,
    as its budget judged it (after the fixed cache's own growth); None when unjudged."""
    for budget, judgement in zip(budgets, judgements, strict=True):
        if budget.metric == "py_blocks" and budget.kind == "rate":
            if judgement.status in FAILING:
                return True
            if judgement.status == "pass":
                return False
    return None
