"""Native memory, from the C heap against Python's allocations and the native window.

Heap growth that no Python site accounts for is native (malloc from C code,
tensor data, a C extension); the native window (the ``native`` sampler's
memray records, ``NativeLine``) names its sites when it ran. Resident shared
memory (pages mapped outside malloc and pymalloc: ``mmap(-1, n)``, shared
memory), which no allocation window sees, gets its line here too.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.where.common import DRIVER_SITES, Finding, Site
from harness.runfiles.records import NativeLine, NativeSite
from harness.units import format_rate

SMALL_OBJECT = 512  # bytes: CPython serves smaller requests from pymalloc, not malloc
NATIVE_SHARE = 0.5  # heap growth Python sites explain less than half of is called native
NATIVE_HINT = "native sites: pip install 'leak-harness[native]' (memray) and run again"
NATIVE_BLIND = (
    "the native window (memray) saw none of it still held: malloc reached through ctypes "
    "or dlsym bypasses its hooks"
)
TOP_NATIVE = 3
PYTHON_ALLOCATORS = ("_PyObject_", "PyObject_", "_PyMem_", "PyMem_")


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
