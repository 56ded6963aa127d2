"""Where it grows: the site, the owner and the signal behind each failing budget.

Pure, like the rest of the analysis: it reads what the worker recorded and
names a culprit only for budgets that failed (``leak``) or nearly did
(``suspicious``). Its sources, each blind to something:

- allocation windows (tracemalloc): the source line whose retained Python
  allocations grow; a site counts only if it grows in every complete window,
  so a structure that was still filling in the first window and stopped is
  not blamed;
- owner paths (objgraph back-references, at the end of the run): what keeps a
  sample of the most-grown type alive, from a module or a long-lived object;
- the C heap against Python allocations: heap growth that no Python site
  accounts for is native (malloc from C code, tensor data, a C extension);
- resident shared memory: pages mapped outside malloc and pymalloc
  (``mmap(-1, n)``, shared memory), which no allocation window sees;
- explained cycles: for cyclic garbage, the cycle with its attribute names;
- level budgets on gauges (a lock never released, accounting that does not
  add up at idle): the gauge and what it held.
"""

from __future__ import annotations

import os
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from harness.analysis.cycle_shapes import aggregate_cycles
from harness.analysis.verdict import Judgement
from harness.budgets import Budget
from harness.runfiles.records import (
    AllocLine,
    EventLine,
    GarbageLine,
    NativeLine,
    NativeSite,
    NotesLine,
    OwnerPath,
    OwnersLine,
    ResourceGroup,
    TensorView,
)
from harness.runfiles.rundata import RunData
from harness.units import format_rate

FAILING = ("leak", "suspicious")
ALLOCATED_SIGNALS = ("heap", "py_blocks", "rss", "uss")  # growth allocation windows can explain
# A Python site growing at under this share of the fastest site's rate is not named:
# the healthy tree's churn sites (the LRU's dict, the pools' free lists, new nodes)
# grew 4 to 33 MB/h in the windows of 60 s zoo runs whose culprit kept 200+ MB/h.
MIN_OF_TOP = 0.25
TOP_SITES = 3
TOP_OWNERS = 3  # most-grown types whose owners are named
MIN_AGREE = 2  # a second path is named when this many sampled objects share it
MIN_PINNED_BYTES = 256 << 10  # storage bytes views keep beyond their own: less is no story
SMALL_OBJECT = 512  # bytes: CPython serves smaller requests from pymalloc, not malloc
NATIVE_SHARE = 0.5  # heap growth Python sites explain less than half of is called native
# A site whose tracked objects the run kept less than this share of is turnover: what
# it makes is freed later than the window could see (a node evicted after a minute).
TURNOVER_SHARE = 0.2
MIN_TYPED = 10  # tracked objects a site must make in a window for its types to count
# The harness's own scenario driver: its synthetic traffic (conversation histories)
# and scheduler keep filling towards their bounds for minutes in every run, fixed
# or not. They drive the code under test; they are not it, so they are never named.
DRIVER_SITES = ("scenarios/workloads/",)
HARNESS_ROOT = "frame harness.worker."  # owner paths start at the worker's own frame
NATIVE_HINT = "native sites: pip install 'leak-harness[native]' (memray) and run again"
NATIVE_BLIND = (
    "the native window (memray) saw none of it still held: malloc reached through ctypes "
    "or dlsym bypasses its hooks"
)
TOP_NATIVE = 3
CONTAINERS = ("dict", "list", "tuple", "set", "frozenset", "deque")
PYTHON_ALLOCATORS = ("_PyObject_", "PyObject_", "_PyMem_", "PyMem_")


@dataclass(frozen=True)
class Finding:
    """One line of "Where it grows"."""

    kind: str  # python, native, cycles, owner, tensors, level
    signal: str  # what saw it: tracemalloc, heap, cyclic_garbage, objects, a gauge
    text: str  # the sentence people read
    site: str | None = None
    stack: tuple[str, ...] = ()
    owner: str | None = None
    per_h: float | None = None  # in ``unit`` per hour, when a rate is known
    unit: str = ""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["stack"] = list(self.stack)
        return data


@dataclass(frozen=True)
class Site:
    """A source line whose retained allocations grew, over the allocation windows."""

    site: str
    stack: tuple[str, ...]
    per_h: float  # median over the windows it grew in, bytes per hour
    per_kop: float | None
    windows: int  # complete windows it grew in
    of: int  # complete windows in all
    avg_bytes: float | None = None  # per allocation kept: <= 512 B lives in pymalloc's arenas
    kept: Kept | None = None  # what the run kept of the tracked objects it makes


@dataclass(frozen=True)
class Kept:
    """Of one tracked type a site makes: how many the run kept, against how many it
    would have kept had it kept all (the window's rate over the census's span)."""

    type: str
    grew: int
    span_s: float
    share: float  # grew / (made in the window, scaled to the span)


def where_it_grows(
    run: RunData, budgets: Sequence[Budget], judgements: Sequence[Judgement],
    rates: Mapping[str, float],
) -> list[Finding]:
    """The findings for the failing budgets; ``rates``: judged growth per hour by series."""
    failing = {b.metric: j for b, j in zip(budgets, judgements, strict=True) if j.status in FAILING}
    found: list[Finding] = crash_findings(run.event("crash"))
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
            found += [site_finding(s) for s in sites
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
    if "cyclic_garbage" in failing or bytes_failing:
        found += cycle_findings(run.garbage_windows)
    found += resource_findings(run, failing, rates)
    if "locked_while_idle" in failing:
        found += lock_findings(run.notes)
    for budget, judgement in zip(budgets, judgements, strict=True):
        if judgement.status in FAILING and budget.kind == "level":
            found.append(Finding("level", budget.metric, judgement.reason))
    return ranked(found)


# Most certain first: a crash site, a named table or lock says what is wrong by itself
# (a crash in the workload's end-of-run check, "closing", is a consequence: after the
# books that showed the leak while it ran);
# a cycle or a view names the attribute, which a broken level (a gauge) does not; a
# site or an owner path is one sample of the growth; a native claim is what is left
# when nothing else explains it.
CERTAINTY = ("crash", "table", "locks", "cycles", "tensors", "level", "closing", "resources",
             "shared", "python", "owner", "native", "heap")


def ranked(found: Sequence[Finding]) -> list[Finding]:
    """The findings, most certain kind first (stable within a kind)."""
    order = {kind: i for i, kind in enumerate(CERTAINTY)}
    return sorted(found, key=lambda f: order.get(f.kind, len(order)))


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


FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# Frames that are the harness's or the interpreter's, not the code under test.
NOT_UNDER_TEST = ("/harness/", "/scenarios/workloads/", "/lib/python3", "<frozen ")


def crash_findings(crash: EventLine | None) -> list[Finding]:
    """Where the scenario raised: the innermost frame of the code under test, its caller
    and the exception, from the worker's ``crash`` event."""
    if crash is None or crash.get("where") == "harness":
        return []
    frames = [(path, int(line), func) for path, line, func
              in FRAME.findall(str(crash.get("traceback") or ""))]
    mine = [f for f in frames if not any(part in f[0] for part in NOT_UNDER_TEST)]
    if not mine:
        return []
    site = frame_text(mine[-1])
    caller = f" (called from {frame_text(mine[-2])})" if len(mine) > 1 else ""
    error = crash.get("error", "an error")
    if crash.get("where") == "close":  # the workload's own check once the loop was over
        text = f"the end-of-run check failed at {site}{caller}: {error}"
        return [Finding("closing", "crash", text, site=site)]
    text = f"the scenario crashed at {site}{caller}: {error}"
    return [Finding("crash", "crash", text, site=site)]


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


def growing_sites(windows: Sequence[AllocLine]) -> list[Site]:
    """Sites that grew in every complete allocation window, largest first."""
    complete = [w for w in windows if w.get("sites") is not None]
    if not complete:
        return []
    seen: dict[str, list[tuple[float, float | None, tuple[str, ...], float | None]]] = {}
    more_blocks: set[str] = set()  # sites that kept more blocks, not only bigger ones
    for window in complete:
        span = float(window["t"]) - float(window["from_t"])
        ops = float(window.get("ops", 0))
        for entry in window["sites"]:
            if entry["bytes"] <= 0 or span <= 0:
                continue
            per_kop = entry["bytes"] / ops * 1000.0 if ops > 0 else None
            count = entry.get("count") or 0
            size = entry["bytes"] / count if count > 0 else None
            if count > 0:
                more_blocks.add(entry["site"])
            seen.setdefault(entry["site"], []).append(
                (entry["bytes"] / span * 3600.0, per_kop, tuple(entry.get("stack", ())), size)
            )
    sites = [
        Site(site, rates[0][2], statistics.median(r[0] for r in rates),
             _median([r[1] for r in rates]), len(rates), len(complete),
             _median([r[3] for r in rates]), kept_of(complete, site))
        for site, rates in seen.items()
        if len(rates) == len(complete) and not site.startswith(DRIVER_SITES)
        # Bytes without blocks: what the site made died within the window and a
        # block it resized (an index tensor replaced by a longer one) was bigger.
        and site in more_blocks
    ]
    sites = [s for s in sites if s.kept is None or s.kept.share >= TURNOVER_SHARE]
    top = max((s.per_h for s in sites), default=0.0)
    kept = [s for s in sites if s.per_h >= MIN_OF_TOP * top]
    return sorted(kept, key=lambda s: -s.per_h)[:TOP_SITES]


def kept_of(windows: Sequence[AllocLine], site: str) -> Kept | None:
    """What the run kept of the site's tracked objects, from the last window whose type
    census began before it (a span of the run, not the window); None if unknown.

    The type kept most is the evidence: a leak keeps all it makes, a healthy
    structure's turnover (nodes evicted later, requests that finish) keeps none.
    """
    for window in reversed(windows):
        census_t, traced_t = window.get("census_from_t"), window.get("traced_from_t")
        if census_t is None or traced_t is None or census_t >= traced_t:
            continue
        entry = next((e for e in window["sites"] if e["site"] == site), None)
        kinds = (entry.get("types") or []) if entry is not None else []
        if sum(k["made"] for k in kinds) < MIN_TYPED:
            return None
        end = float(window["t"])
        scale = (end - float(census_t)) / max(end - float(traced_t), 1e-9)
        best = max(kinds, key=lambda k: k["grew"] / k["made"])
        share = best["grew"] / (best["made"] * scale)
        return Kept(best["type"], best["grew"], end - float(census_t), min(share, 1.0))
    return None


def site_finding(site: Site) -> Finding:
    rate = format_rate(site.per_h, "B/h")
    per_kop = f", {format_rate(site.per_kop, 'B/kop')}" if site.per_kop is not None else ""
    caller = site_caller(site)
    called = f" (called from {caller})" if caller else ""
    text = (
        f"{site.site}{called} keeps what it allocates: +{rate}{per_kop} retained, in "
        f"{site.windows} of {site.of} allocation windows (tracemalloc)"
    )
    if site.kept is not None:
        text += (f"; the {site.kept.type} objects it makes grew by {site.kept.grew:,} over "
                 f"{site.kept.span_s:.0f} s, {site.kept.share:.0%} of what it made")
    return Finding("python", "tracemalloc", text, site=site.site, stack=site.stack,
                   per_h=site.per_h, unit="B")


def site_caller(site: Site) -> str | None:
    """The first frame out of the site's file: a helper's caller is often the owner."""
    filename = site.site.rpartition(":")[0]
    after = list(site.stack)[1:] if site.stack and site.stack[0] == site.site else []
    for frame in after:
        if frame.rpartition(":")[0] != filename:
            return frame
    return None


def native_finding(
    heap_per_h: float | None, sites: Sequence[Site], traced: bool = True,
    budget_per_h: float | None = None, native_windows: Sequence[NativeLine] = (),
    python: bool | None = None,
) -> list[Finding]:
    """Heap growth that Python allocations do not explain, said in words.

    ``python``: whether Python's own block count grows over the run (None: not
    judged). Flat, all of the heap's growth is native; growing, the windows cannot
    tell how much of the heap is Python's (small objects live in arenas, a list's
    items array in the heap), so native is claimed only on the native window's word.

    Native when Python's sites explain less than half of it, or when what they
    leave unexplained breaks the heap budget on its own (a healthy cache's
    churn inside a 2 s window shows as Python sites too, and must not hide a
    native leak beside it). ``traced``: whether the run had allocation windows;
    without them nothing tells Python allocations from native ones, and the
    finding says so. ``native_windows``: the native window's records (memray, when
    installed); their sites replace the hint on how to get them.
    """
    if heap_per_h is None or heap_per_h <= 0:
        return []
    if python is False:
        return [native_whole_run(heap_per_h, native_windows)]
    if python is True:
        return native_on_memray_word(heap_per_h, native_windows)
    if not traced:
        text = (
            f"the C heap grows {format_rate(heap_per_h, 'B/h')}; this run had no allocation "
            "windows to tell Python allocations from native ones (run without --no-attribution)"
        )
        return [Finding("heap", "heap", text, per_h=heap_per_h, unit="B")]
    # Objects of 512 B or less live in pymalloc's arenas, not in the C heap.
    in_sites = sum(s.per_h for s in sites if s.avg_bytes is None or s.avg_bytes > SMALL_OBJECT)
    native = heap_per_h - in_sites
    beyond_budget = budget_per_h is not None and native > budget_per_h
    if in_sites >= NATIVE_SHARE * heap_per_h and not beyond_budget:
        return []
    if python_seen_natively(native_windows) >= NATIVE_SHARE * native:
        return []  # the native window saw it: Python objects that tracemalloc undercounted
    text = (
        f"native memory grows ~{format_rate(native, 'B/h')}: the C heap grows "
        f"{format_rate(heap_per_h, 'B/h')} and Python's allocations over 512 B account for "
        f"{format_rate(in_sites, 'B/h')} of it (malloc from C code, tensor data or a C "
        f"extension); {native_sites_text(native_windows)}"
    )
    return [Finding("native", "heap", text, per_h=native, unit="B")]


def native_whole_run(heap_per_h: float, windows: Sequence[NativeLine]) -> Finding:
    """The heap grows while Python's own block count does not: native memory."""
    text = (
        f"native memory grows ~{format_rate(heap_per_h, 'B/h')}: the C heap grows and "
        "Python's own count of its allocations (py_blocks) does not, over the whole run "
        f"(malloc from C code, tensor data or a C extension); {native_sites_text(windows)}"
    )
    return Finding("native", "heap", text, per_h=heap_per_h, unit="B")


def native_on_memray_word(heap_per_h: float, windows: Sequence[NativeLine]) -> list[Finding]:
    """Python grows too: native only for what the native window saw held outside Python."""
    native = native_seen(windows)
    if native < NATIVE_SHARE * heap_per_h:
        return []
    text = (
        f"native memory grows ~{format_rate(native, 'B/h')} beside Python's own growth: "
        f"{native_sites_text(windows)}"
    )
    return [Finding("native", "heap", text, per_h=native, unit="B")]


def native_seen(windows: Sequence[NativeLine]) -> float:
    """Bytes per hour the native window saw kept outside Python's allocator and the driver."""
    return native_window_rate(windows, through_python=False)


def python_seen_natively(windows: Sequence[NativeLine]) -> float:
    """Bytes per hour the native window saw kept through Python's own allocator.

    A retained Python object over 512 B is malloc'd by Python's allocator: when
    memray sees the heap's growth there, the growth is Python's, however little
    of it the (slower, sampled) allocation windows caught. Zero without a window.
    """
    return native_window_rate(windows, through_python=True)


def native_window_rate(windows: Sequence[NativeLine], through_python: bool) -> float:
    """Bytes per hour the last native window saw still held, through Python's allocator
    or outside it, the scenario driver's sites left out; zero without a window."""
    if not windows:
        return 0.0
    window = windows[-1]
    span = float(window["t"]) - float(window["from_t"])
    if span <= 0:
        return 0.0
    kept = sum(s["bytes"] for s in window.get("sites") or []
               if s["bytes"] > 0 and through_python_allocator(s) == through_python
               and not from_driver(s))
    return float(kept) * 3600.0 / span


def through_python_allocator(site: NativeSite) -> bool:
    """A native window's site whose allocator is Python's own: a Python allocation."""
    return str(site["native"]).startswith(PYTHON_ALLOCATORS)


def from_driver(site: NativeSite) -> bool:
    """A native window's site in the scenario driver, which is never the culprit."""
    return any(d in str(site["python"]) for d in DRIVER_SITES)


def native_sites_text(windows: Sequence[NativeLine]) -> str:
    """The native window's top sites in words, or how to get them."""
    if not windows:
        return NATIVE_HINT
    window = windows[-1]
    span = float(window["t"]) - float(window["from_t"])
    sites = [s for s in window.get("sites") or []
             if s["bytes"] > 0 and not through_python_allocator(s) and not from_driver(s)]
    sites = sites[:TOP_NATIVE]
    if not sites or span <= 0:
        return NATIVE_BLIND
    named = "; ".join(
        f"{s['native']} from {s['python']} ({format_rate(s['bytes'] * 3600 / span, 'B/h')}, "
        f"{s['count']} allocations)" for s in sites
    )
    return f"native sites still held after a {span:.1f} s window (memray): {named}"


def shmem_finding(shmem_per_h: float | None) -> list[Finding]:
    """Growth of resident shared memory, which neither malloc nor Python's allocator sees."""
    if shmem_per_h is None or shmem_per_h <= 0:
        return []
    text = (
        f"shared memory grows ~{format_rate(shmem_per_h, 'B/h')} (resident pages of "
        "mmap(-1, n), multiprocessing.shared_memory, tensors in shared memory or mapped "
        "/dev/shm files: mappings that are never closed); the C heap and Python's "
        "allocators do not see them; an owner path below holds the mapping objects"
    )
    return [Finding("shared", "shmem", text, per_h=shmem_per_h, unit="B")]


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


def owner_findings(owners: Sequence[OwnersLine]) -> list[Finding]:
    """What keeps samples of the most-grown types alive (the worker's owners line).

    Each type's path is the one most of its sampled objects share; a path only
    some share is named too ("also"), as a leak among a structure's normal
    growth (a tree's nodes) may hold only part of the new objects.
    """
    found = []
    for record in owners[-1:]:
        entries = sorted(record.get("paths", []), key=lambda e: -int(e.get("grew", 0)))
        for entry in entries[:TOP_OWNERS]:
            paths = [(entry.get("path"), entry.get("agree"), entry.get("holds"))] + [
                (o.get("path"), o.get("agree"), o.get("holds")) for o in entry.get("others", [])
                if int(o.get("agree") or 0) >= MIN_AGREE
            ]
            for path, agree, holds in paths:
                # A path whose last holder is not a container of at least half as many
                # as the type grew by does not keep the growth: the samples are a
                # structure's turnover (a tree's nodes, each holding one key), found
                # because the type grew elsewhere. (A holder of untracked objects that
                # gained them is its own evidence.)
                if not path or not keeps_growth(entry, holds):
                    continue
                path = shorter(str(path))
                if through_driver(path) or not names_a_holder(path, str(entry["type"])):
                    continue
                share = f", {agree} of {entry['sampled']} sampled" if entry.get("sampled") else ""
                text = f"{entry['type']} (+{entry.get('grew')}{share}) is held by {path}"
                found.append(Finding("owner", "objects", text, owner=str(path)))
    return found


def keeps_growth(entry: OwnerPath, holds: int | None) -> bool:
    """Whether the path's holding container is big enough to keep the type's growth.

    Half the growth for a tracked type (the rest grew elsewhere, or is noise); all
    of it for untracked objects held one each (the holders' container must keep them
    all, else the holders are a structure's turnover: a tree's nodes, a key each);
    a holder of untracked objects that gained them is its own evidence.
    """
    if holds is None or entry.get("holder") == "one":
        return True
    grew = int(entry.get("grew") or 0)
    return holds >= grew if entry.get("holder") == "each" else 2 * holds >= grew


def tensor_findings(owners: Sequence[OwnersLine]) -> list[Finding]:
    """Small tensor views keeping far larger storages alive (SGLang #17191, #20271)."""
    found = []
    for record in owners[-1:]:
        tensors = record.get("tensors")
        oversized = tensors.get("oversized") if tensors else None
        if not oversized:
            continue
        pinned = float(oversized.get("storage_bytes") or 0) - float(
            oversized.get("view_bytes") or 0)
        if not oversized.get("storages") or pinned < MIN_PINNED_BYTES:
            continue
        example: TensorView | None = oversized.get("example")
        path = shorter(str(example["path"])) if example and example.get("path") else None
        stored = format_rate(oversized["storage_bytes"], "B")
        text = (
            f"{oversized['storages']} tensor storages ({stored}) are kept alive by "
            f"{format_rate(oversized['view_bytes'], 'B')} of views"
        )
        if example:
            text += (
                f"; e.g. a {format_rate(example['view_bytes'], 'B')} view of a "
                f"{format_rate(example['storage_bytes'], 'B')} storage"
                + (f", held by {path}" if path else "")
            )
        found.append(Finding("tensors", "objects", text, owner=path))
    return found


# The scenario driver's own objects, under the workload the worker holds: its
# scheduler's queues, the idle check's ledgers, the traffic's histories. The code
# under test hangs under ``CacheWorkload.cache``.
DRIVER_ROOT = "workload -> CacheWorkload."
UNDER_TEST = "workload -> CacheWorkload.cache"


def through_driver(path: str) -> bool:
    """An owner path through the harness's scenario driver rather than the cache."""
    return path.startswith(DRIVER_ROOT) and not path.startswith(UNDER_TEST)


def names_a_holder(path: str, kind: str) -> bool:
    """Whether the path names something holding the object (an attribute, a frame or a
    container), not just the object itself (``UntypedStorage is held by UntypedStorage``)."""
    hops = [hop.strip() for hop in path.split("->")]
    return any(hop != kind for hop in hops)


def shorter(path: str) -> str:
    """An owner path from the worker's own frame starts at the workload it holds."""
    head, sep, rest = path.partition(" -> ")
    if head.startswith(HARNESS_ROOT) and sep:
        return f"{head.rsplit('.', 1)[-1]} -> {rest}"
    return path


def cycle_members(windows: Sequence[GarbageLine]) -> set[str]:
    """The classes along the most common explained cycle (``TreeNode.parent`` -> TreeNode);
    not the containers on it (``dict[]``): a dict made elsewhere may leak on its own."""
    shapes = aggregate_cycles(c for w in windows for c in w.get("cycles", ()))
    if not shapes:
        return set()
    named = {edge.split(".")[0] for edge in shapes[0].shape if "[" not in edge}
    return named - set(CONTAINERS)


def cycle_findings(windows: Sequence[GarbageLine]) -> list[Finding]:
    shapes = aggregate_cycles(c for w in windows for c in w.get("cycles", ()))
    if not shapes:
        return []
    top = shapes[0]
    path = top.describe()
    text = (
        f"reference cycles: {path} ({top.count} seen); collections of the young "
        "generations do not free them, only a full (gen-2) collection does"
    )
    return [Finding("cycles", "cyclic_garbage", text, owner=path)]


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None
