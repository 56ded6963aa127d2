"""Holders, from the samplers that walk the heap graph (``owners`` and ``garbage``).

Owner paths: at the end of the run the owners sampler searches back from a
sample of the most-grown types' new objects to a root, over
``gc.get_referrers`` (the harness's own breadth-first search,
:mod:`harness.worker.heapgraph.search`), and records per type the path most
samples share (``OwnersLine``): what keeps the growth alive, from a module or
a long-lived object; with it, the tensor storages small views keep alive.
Explained cycles: for cyclic garbage, the cycle with its attribute names
(``GarbageLine``).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.cycle_shapes import aggregate_cycles
from harness.analysis.where.common import Finding
from harness.runfiles.records import GarbageLine, OwnerPath, OwnersLine, TensorView
from harness.units import format_rate

TOP_OWNERS = 3  # most-grown types whose owners are named
MIN_AGREE = 2  # a second path is named when this many sampled objects share it
MIN_PINNED_BYTES = 256 << 10  # storage bytes views keep beyond their own: less is no story
HARNESS_ROOT = "frame harness.worker."  # owner paths start at the worker's own frame
CONTAINERS = ("dict", "list", "tuple", "set", "frozenset", "deque")


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
