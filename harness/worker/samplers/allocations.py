"""Allocation windows: where retained Python allocations grow, by source line.

tracemalloc halves the workload's throughput while it traces, so it never runs
all the time: a few short windows, each traced from its start. Within a window
two snapshots (at its middle and at its end) are compared: a site whose
retained bytes grow between them keeps what it allocates; a site of
in-flight work allocates and frees as much, and nets to zero. Two windows far
apart tell a leak (grows in both) from a structure that was still filling.

Each window is written as ``attribution`` events (``start``, ``end``) so the
analysis can drop the samples it slowed down from every judged rate, and as
one ``alloc`` line with the top sites.

A window also says what its sites made that the collector tracks (by type,
from ``tracemalloc.get_object_traceback``) and how each of those types grew
over the whole run so far (a type census at the first window's start and at
this window's end). A site of the healthy code's turnover (a tree node evicted
a minute later) grows inside a window as a leak does; over the run, the count
of what it makes does not. tracemalloc sees what goes through
Python's allocators; it is blind to tensor data, ``mmap`` and ``malloc`` from
native code (the heap signal sees the last two).
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from harness.runfiles.records import AllocLine, AllocSite, SiteTypes
from harness.worker.frames import HARNESS_DIR, is_library, short
from harness.worker.heapgraph.module_holders import Named, holders_by_site, named_containers
from harness.worker.samplers.base import BaseSampler

TOP_SITES = 10
FRAMES = 8  # stack depth kept per trace: enough to reach the caller that owns the data
TOP_TYPES = 3  # types named per site
STACK_FRAMES = 4  # frames stored per site: the line, its helpers and the caller past them


def stop_races_other_threads() -> bool:
    """Whether ``tracemalloc.stop()`` here can crash a thread allocating without the GIL.

    Before CPython 3.12.9 and 3.13.2 (python/cpython#128679), a thread that enters
    tracemalloc's raw-allocator hook without the GIL (``os.getcwd`` does, and any C code
    calling ``PyMem_RawMalloc`` between ``Py_BEGIN_ALLOW_THREADS`` and its end) waits
    for the GIL, and if the thread holding it stops tracing meanwhile, records its trace
    into freed memory: SIGSEGV. The worker starts and stops windows on the thread that
    runs the workload, so none of its own threads can be there; a recorder's polling
    thread runs beside the program's.
    """
    version = sys.version_info[:3]
    return version < (3, 12, 9) or (3, 13, 0) <= version < (3, 13, 2)


@dataclass
class Window:
    start_s: float
    length_s: float
    baseline: tracemalloc.Snapshot | None = None
    baseline_t: float = 0.0
    baseline_ops: int = 0
    started_t: float = 0.0  # when tracing started


class AllocationSampler(BaseSampler):
    name = "allocations"

    def __init__(self, starts_s: Sequence[float], length_s: float = 2.0) -> None:
        super().__init__()
        self._pending = [Window(t, length_s) for t in sorted(starts_s)]
        self._open: Window | None = None
        self._index = 0
        self._census: Counter[type] | None = None  # types at the first window's start
        self._census_t = 0.0
        self._containers: list[Named] = []  # what may hold a site's allocations, by name

    def unavailable(self) -> str | None:
        if tracemalloc.is_tracing():
            return "tracemalloc is already tracing in this process (PYTHONTRACEMALLOC?)"
        return None

    def due(self, now: float) -> bool:
        """Whether :meth:`poll` at ``now`` would start, snapshot or end a window."""
        window = self._open
        if window is None:
            return bool(self._pending) and now >= self._pending[0].start_s
        if window.baseline is None:
            return now >= window.start_s + window.length_s / 2
        return now >= window.start_s + window.length_s

    def poll(self, now: float, ops: int) -> None:
        self.ops = ops
        window = self._open
        if window is None:
            if self._pending and now >= self._pending[0].start_s:
                self._begin(self._pending.pop(0), now)
        elif window.baseline is None and now >= window.start_s + window.length_s / 2:
            window.baseline, window.baseline_t, window.baseline_ops = snapshot(), now, ops
        elif window.baseline is not None and now >= window.start_s + window.length_s:
            self._finish(window, now)

    def stop(self) -> None:
        if self._open is not None and tracemalloc.is_tracing():
            held = tracemalloc.get_tracemalloc_memory()
            tracemalloc.stop()  # cut short by the end of the run: nothing to compare
            self._containers = []
            self.sink.event("attribution", self.now(), phase="end", window=self._index,
                            complete=False, traced_bytes=held)

    def _begin(self, window: Window, now: float) -> None:
        self._index += 1
        self._open = window
        if self._census is None:  # counted before tracing starts: it is 20x slower after
            self._census, self._census_t = Counter(map(type, gc.get_objects())), now
        self.sink.event("attribution", now, phase="start", window=self._index)
        window.started_t = now
        self._containers = named_containers()  # untraced: 10x faster
        tracemalloc.start(FRAMES)

    def _finish(self, window: Window, now: float) -> None:
        end = snapshot()
        everything = gc.get_objects()
        made = traced_objects(everything)
        holders = holders_by_site(self._containers, site_of)  # traced: it reads tracebacks
        self._containers = []
        # What tracemalloc held bounds what it can leave behind (harness.analysis.windows).
        held = tracemalloc.get_tracemalloc_memory()
        tracemalloc.stop()
        assert window.baseline is not None
        sites = top_sites(end, window.baseline)
        census = Counter(map(type, everything))  # counted untraced: 20x faster
        del everything
        add_site_types(sites, made, self._census or census, census)
        del made
        for entry in sites:
            if entry["site"] in holders:
                entry["held_by"] = holders[entry["site"]]
        self.sink.event("attribution", self.now(), phase="end", window=self._index, complete=True,
                        traced_bytes=held)
        line: AllocLine = {
            "type": "alloc", "t": now, "window": self._index,
            "from_t": round(window.baseline_t, 4), "ops": self.ops - window.baseline_ops,
            "sites": sites, "traced_from_t": round(window.started_t, 4),
            "census_from_t": round(self._census_t, 4),
        }
        self.sink.line(line)
        self._open = None


def snapshot() -> tracemalloc.Snapshot:
    """The traces still alive, without tracemalloc's own."""
    return tracemalloc.take_snapshot().filter_traces([
        tracemalloc.Filter(False, tracemalloc.__file__),
    ])


def top_sites(end: tracemalloc.Snapshot, baseline: tracemalloc.Snapshot) -> list[AllocSite]:
    """The sites whose retained bytes grew most between the snapshots, by owning frame.

    Allocations whose owning frame is the harness's (its samplers reading a
    snapshot) are not the workload's and are left out. A site's call paths
    (tracebacks) that shrank give its ``freed`` bytes: a structure's turnover
    allocates on one path what it frees on another (a table re-allocated at its
    working size, a node's key made on one request's path and freed with the
    node), and only the net says what the site kept.
    """
    grown: dict[str, AllocSite] = {}
    shrunk: list[tuple[str, int]] = []
    for diff in end.compare_to(baseline, "traceback"):
        if diff.size_diff == 0:
            continue
        innermost_first = list(reversed(diff.traceback))
        owner = innermost_first[owner_frame(innermost_first)]
        if os.path.abspath(owner.filename).startswith(HARNESS_DIR):
            continue
        frames = [f"{short(f.filename)}:{f.lineno}" for f in innermost_first][:STACK_FRAMES]
        site = f"{short(owner.filename)}:{owner.lineno}"
        if diff.size_diff < 0:
            shrunk.append((site, -diff.size_diff))
            continue
        entry = grown.setdefault(site, {"site": site, "stack": frames, "bytes": 0, "count": 0})
        entry["bytes"] += diff.size_diff
        entry["count"] += diff.count_diff
    for site, freed in shrunk:
        shrinking = grown.get(site)
        if shrinking is not None:
            shrinking["freed"] = shrinking.get("freed", 0) + freed
    return sorted(grown.values(), key=lambda e: -e["bytes"])[:TOP_SITES]


def traced_objects(objects: list[object]) -> list[tuple[type, tracemalloc.Traceback]]:
    """The type and allocation traceback of each of ``objects`` made while tracing."""
    get = tracemalloc.get_object_traceback
    return [(type(o), tb) for o in objects if (tb := get(o)) is not None]


def add_site_types(
    sites: list[AllocSite], made: list[tuple[type, tracemalloc.Traceback]],
    before: Counter[type], now: Counter[type],
) -> None:
    """Give each site the tracked types it made in the window (most first) and how
    many more of each type are alive now than at the census's start."""
    wanted = {entry["site"] for entry in sites}
    by_site: dict[str, Counter[type]] = defaultdict(Counter)
    for kind, traceback in made:
        innermost_first = list(reversed(traceback))
        owner = innermost_first[owner_frame(innermost_first)]
        site = f"{short(owner.filename)}:{owner.lineno}"
        if site in wanted:
            by_site[site][kind] += 1
    for entry in sites:
        kinds = by_site.get(entry["site"])
        if kinds:
            entry["types"] = [
                SiteTypes(type=kind.__name__, made=n, grew=now[kind] - before[kind])
                for kind, n in kinds.most_common(TOP_TYPES)
            ]


def site_of(traceback: tracemalloc.Traceback) -> str:
    """The site an allocation is counted at, as :func:`top_sites` names it."""
    innermost_first = list(reversed(traceback))
    owner = innermost_first[owner_frame(innermost_first)]
    return f"{short(owner.filename)}:{owner.lineno}"


def owner_frame(innermost_first: Sequence[tracemalloc.Frame]) -> int:
    """Index of the innermost frame outside the standard library (0 if there is none).

    ``list.append`` in ``collections`` or a copy in ``copy.py`` says nothing;
    the caller that keeps the result does.
    """
    for index, frame in enumerate(innermost_first):
        if not is_library(frame.filename):
            return index
    return 0
