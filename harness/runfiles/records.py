"""The lines of ``samples.jsonl`` (``leak-harness/samples`` version 1), one TypedDict each.

The worker's samplers build these and the analysis reads them, across a
process and a file: both ends are type-checked against the same classes, and
``tests/harness/test_records.py`` holds recorded files to them (every
required key present, no key the class does not name). Every line has
``type`` and ``t`` (seconds since the run started). Stdlib only: the worker
imports it.

No ``from __future__ import annotations`` here: ``TypedDict`` reads
``NotRequired`` from evaluated annotations only, and the tests read the keys
back through ``__required_keys__``.
"""

from typing import Any, Literal, NotRequired, TypedDict

# -- the header ----------------------------------------------------------------------------


class HeaderLine(TypedDict):
    type: Literal["header"]
    schema: str  # "leak-harness/samples"
    version: int
    config: dict[str, Any]  # the frozen run config (harness.config.RunConfig.to_dict)
    env: dict[str, Any]  # what makes two runs comparable (harness.runfiles.samples.environment)


# -- periodic samples ----------------------------------------------------------------------


class RssLine(TypedDict):
    type: Literal["rss"]
    t: float
    rss: int  # bytes
    uss: int | None  # bytes; read less often than rss, null between
    ops: int  # cumulative


class GcLine(TypedDict):
    """The collections of one generation since the last flush (gen 2: each one)."""

    type: Literal["gc"]
    t: float
    gen: int
    count: int
    collected: int
    uncollectable: int
    pause_s: float
    max_pause_s: float
    ops: int


class HeapLine(TypedDict):
    """Exact byte and count signals; each but ``py_blocks`` only where it can be read."""

    type: Literal["heap"]
    t: float
    ops: int
    py_blocks: int  # pymalloc blocks in use
    heap: NotRequired[int]  # glibc malloc bytes in use
    shmem: NotRequired[int]  # resident shared memory, bytes
    threads: NotRequired[int]
    fds: NotRequired[int]
    cuda_allocated: NotRequired[int]
    cuda_reserved: NotRequired[int]


class TensorsLine(TypedDict):
    type: Literal["tensors"]
    t: float
    ops: int
    tensor_pinned: int  # storage bytes kept only by far smaller views, beyond those views
    tensor_storage: int  # bytes of all storages
    tensors: int
    cpu_s: float  # the census's own CPU time


class GaugesLine(TypedDict):
    type: Literal["gauges"]
    t: float
    values: dict[str, float]
    ops: int


class ObjectsLine(TypedDict):
    type: Literal["objects"]
    t: float
    ops: int
    counts: dict[str, int]  # live objects by type
    growth: dict[str, int]
    total: int


class Cycle(TypedDict):
    """One explained reference cycle (the cycle explainer's)."""

    type: str
    path: list[str]  # edge names, ``TreeNode.parent``
    length: int
    retained_bytes: int
    retained_objects: int


class GarbageCensus(TypedDict):
    """What one window's collection saved."""

    count: int
    by_type: dict[str, int]
    bytes_by_type: dict[str, int]
    bytes: int
    cycles: list[Cycle]
    cycles_error: NotRequired[str]


class GarbageLine(GarbageCensus):
    """One ``DEBUG_SAVEALL`` window: the cyclic garbage a forced collection found."""

    type: Literal["garbage"]
    t: float
    ops: int
    collected: int
    freed: int
    final: bool
    released: NotRequired[dict[str, int]]  # what the window's own collections gave back


class ProgressLine(TypedDict):
    type: Literal["progress"]
    t: float
    ops: int
    ops_per_s: float
    phase: Literal["warmup", "measure"]


# -- attribution: windows and the end-of-run search ----------------------------------------


class SiteTypes(TypedDict):
    """A tracked type a site made in the window, and its growth over the run so far."""

    type: str
    made: int  # alive at the window's end, made since it started tracing
    grew: int  # alive now less alive at the census's start (the first window's start)


class SiteHolder(TypedDict):
    """A container a module names (``SEEN``, ``Cache.entries``) whose newest element the
    site made (:mod:`harness.worker.heapgraph.module_holders`)."""

    name: str
    module: str  # its file (``examples/leaky_service.py``), else its name
    type: str
    entries: int


class AllocSite(TypedDict):
    site: str  # ``file:line`` of the owning frame
    stack: list[str]
    bytes: int  # retained growth between the window's snapshots
    count: int
    types: NotRequired[list[SiteTypes]]  # the tracked objects it made, by type
    # What its call paths that shrank freed between the snapshots (absent: none
    # shrank, or a file written before it was recorded); ``bytes`` less it is the net.
    freed: NotRequired[int]
    held_by: NotRequired[SiteHolder]  # the named container holding what it made, if any


class AllocLine(TypedDict):
    """One tracemalloc window."""

    type: Literal["alloc"]
    t: float
    window: int  # 1, 2, ...
    from_t: float  # its baseline snapshot
    ops: int  # done since
    sites: list[AllocSite]
    traced_from_t: NotRequired[float]  # when the window started tracing
    census_from_t: NotRequired[float]  # when the type census sites' types grew from began


class NativeSite(TypedDict):
    native: str  # the innermost native function
    python: str  # ``file:line (function)`` that led to it
    bytes: int  # still held when the window closed
    count: int


class NativeLine(TypedDict):
    """The native window (memray, when installed)."""

    type: Literal["native"]
    t: float
    from_t: float
    ops: int
    sites: list[NativeSite]
    seconds: float  # reading the capture
    error: NotRequired[str]


class OtherPath(TypedDict):
    path: str | None
    root: str | None
    agree: int
    holds: NotRequired[int]  # entries of the container holding the object (0: an attribute)


class OwnerPath(TypedDict):
    """What holds one grown type: the path most of its samples agree on, or why none."""

    type: str
    qualname: str
    grew: int
    count: int
    tracked: bool  # false: its new objects are untracked, the path leads to a holder
    path: str | None  # ``mod.HOLDER -> Holder.items -> list[3] -> Record``
    root: str | None  # ``module m``, ``class m.C``, ``frame f at file:line``, ``no referrer...``
    depth: int | None  # references from the root
    holds: NotRequired[int]  # entries of the container holding the object (0: an attribute)
    why: NotRequired[str]  # when path is null
    sampled: NotRequired[int]
    agree: NotRequired[int]  # samples on the reported path's shape
    others: NotRequired[list[OtherPath]]
    note: NotRequired[str]  # untracked types: how the path was found
    holder: NotRequired[Literal["one", "each"] | None]
    held_here: NotRequired[int]
    gained: NotRequired[int]


class TensorView(TypedDict):
    """A storage far larger than its largest owned view, with who holds that view."""

    view_bytes: int
    storage_bytes: int
    ratio: float | None
    shape: list[int]
    dtype: str
    device: str
    tensors_on_storage: int
    path: str | None
    root: str | None
    why: NotRequired[str]


class Oversized(TypedDict):
    storages: int
    view_bytes: int
    storage_bytes: int
    example: NotRequired[TensorView]  # the worst of them


class TensorViews(TypedDict):
    count: int
    view_bytes: int
    storage_bytes: int  # once per storage
    storages: int
    oversized: Oversized
    views: list[TensorView]
    unreadable: NotRequired[int]


class OwnersLine(TypedDict):
    """Once, at the end: what holds the types that grew most, and tensors kept by views."""

    type: Literal["owners"]
    t: float
    ops: int
    paths: list[OwnerPath]
    tensors: TensorViews | None  # null unless the workload imported torch
    untracked_counted: bool
    gave_up: bool  # the time budget cut the search
    seconds: float
    search_seconds: float
    error: NotRequired[str]


class LockSite(TypedDict):
    site: str
    nodes: int


class UnreleasedLocks(TypedDict):
    nodes: int
    sites: list[LockSite]


class LostGroup(TypedDict):
    """Slots lost from one pool that one call site allocated for requests that took
    one exit path (``scenarios/workloads/slots.py``)."""

    site: str  # the innermost frame of the code under test that called alloc
    stack: list[str]  # innermost first, up to the scenario driver
    exit: str  # abort-waiting, retract, failed-schedule, finish, ..., or "unknown"
    slots: int
    requests: list[str]  # the first few request ids


class LostSlots(TypedDict):
    pool: str
    short: int  # slots the pool's idle books miss
    found: int  # live slots the ledger holds that neither the cache nor a waiting request does
    groups: list[LostGroup]  # largest first


class TwiceHeld(TypedDict):
    """A pool whose idle books count more than it has: slot ids the tree holds twice."""

    pool: str
    over: int  # slots the books count beyond the pool's size
    twice: int  # distinct slot ids the tree holds under two nodes or more
    extra: int  # holdings beyond one per id (what evictable + protected count again)
    example: int  # one such slot id


class HeldInTransfer(TypedDict):
    """What the books still counted in transfer at the end of the last quiet stretch
    (``scenarios/workloads/quiet.py``), the tree's copies locks for work in flight still
    held, and how long that stretch was."""

    pools: dict[str, int]  # pool -> slots
    locked: NotRequired[dict[str, int]]  # pool -> slots of tree copies a lock still holds
    rounds: int  # event rounds with nothing running or waiting
    seconds: float


class NotesLine(TypedDict):
    """Once, at loop end: the workload's own facts (``notes()``, see harness.api)."""

    type: Literal["notes"]
    t: float
    unreleased_locks: NotRequired[UnreleasedLocks]
    # Per-request table -> request id -> the exit path it left by (ids as JSON keys).
    stale_request_entries: NotRequired[dict[str, dict[str, str]]]
    # Per pool whose books were off: the lost slots' sites and paths, or the ids held twice.
    lost_slots: NotRequired[list[LostSlots | TwiceHeld]]
    held_in_transfer: NotRequired[HeldInTransfer]
    exit_paths_not_taken: NotRequired[dict[str, str]]  # exit path -> the call the cache lacks
    overlap_not_taken: NotRequired[str]  # why overlap scheduling did not run: a missing call
    sessions_not_taken: NotRequired[str]  # why streaming sessions did not run: a missing call
    disagg_not_taken: NotRequired[str]  # why a PD load ran as one engine: a missing call
    speculation_not_taken: NotRequired[str]  # why speculative decoding did not run
    bigram_keys_not_taken: NotRequired[str]  # why EAGLE's bigram keys were not exercised
    # Counter gauge -> what it counts: what the run must see rise after its warm-up
    # (harness.analysis.seen); a run that saw none of one judged nothing.
    expects: NotRequired[dict[str, str]]
    # What the target's own notes() says it does not drive, and why (one line each).
    target_notes: NotRequired[list[str]]
    error: NotRequired[str]  # notes() raised


# -- events --------------------------------------------------------------------------------


class ResourceGroup(TypedDict):
    what: str  # ``Spill._flush (cache.py:40)``, ``socket``, ``file in /tmp``
    count: int


class EventLine(TypedDict):
    """A named moment; which of the optional fields it has depends on ``name``."""

    type: Literal["event"]
    t: float
    name: str
    ops: NotRequired[int]
    reason: NotRequired[str]  # loop_end, end, *_unavailable, gauge_dropped, attribution_skipped
    build_s: NotRequired[float]  # start (worker)
    rss: NotRequired[int]  # start (worker)
    target: NotRequired[str]  # start (worker): what a --target says it runs (describe())
    pid: NotRequired[int]  # start (recorder)
    ppid: NotRequired[int]
    argv: NotRequired[list[str]]
    scenario: NotRequired[str]  # scenario (recorder)
    where: NotRequired[str]  # crash
    error: NotRequired[str]  # crash, sampler_failed, thread_died
    thread: NotRequired[str]  # thread_died: the thread's name
    traceback: NotRequired[str]
    phase: NotRequired[Literal["start", "end"]]  # attribution
    window: NotRequired[int]
    complete: NotRequired[bool]
    traced_bytes: NotRequired[int]
    signal: NotRequired[str]  # signal_unavailable
    sampler: NotRequired[str]  # sampler_unavailable, sampler_failed
    gauge: NotRequired[str]  # gauge_dropped
    threads: NotRequired[list[ResourceGroup]]  # resources
    fds: NotRequired[list[ResourceGroup]]
    rss_before_collect: NotRequired[int]  # malloc_trim
    rss_before: NotRequired[int]
    rss_after: NotRequired[int]
    released: NotRequired[int]
    trimmed: NotRequired[bool]
    line: NotRequired[int]  # truncated: the line cut mid-write


SampleLine = (
    RssLine | GcLine | HeapLine | TensorsLine | GaugesLine | ObjectsLine | GarbageLine
    | ProgressLine | AllocLine | NativeLine | OwnersLine | NotesLine | EventLine
)
# The TypedDict of each line ``type``.
LINE_TYPES: dict[str, type] = {
    "header": HeaderLine, "rss": RssLine, "gc": GcLine, "heap": HeapLine,
    "tensors": TensorsLine, "gauges": GaugesLine, "objects": ObjectsLine,
    "garbage": GarbageLine, "progress": ProgressLine, "alloc": AllocLine,
    "native": NativeLine, "owners": OwnersLine, "notes": NotesLine, "event": EventLine,
}
