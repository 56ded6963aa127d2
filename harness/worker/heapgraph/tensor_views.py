"""Tensor storage kept alive by views far smaller than it: one grouping, two readers.

A tensor view (``t[a:b]``) keeps the whole storage it was cut from allocated.
Tensors are grouped by storage (device, data pointer) once, here; a storage
is *pinned* when it is at least PIN_RATIO times its largest *owned* view,
where a base tensor that only its views keep (PyTorch keeps a view's base
object alive from C++) is not owned. Two readers decide ownership two ways,
each what it can afford:

- the tensors sampler, every few seconds: by reference count
  (:func:`owned_by_refcount`, against a probe base made the same way), which
  costs nothing beyond the walk;
- the owner search's report at the end of a run: by a ``gc.get_referrers``
  scan (:func:`owned_by_referrers`), which also names who holds each view.

Both go through :func:`group_by_storage` and :func:`pinned_storages`, and a
test holds the two to the same answer, so the report cannot contradict the
``tensor_pinned`` budget. Nothing here imports torch: it is read from
``sys.modules`` when the workload imported it.
"""

from __future__ import annotations

import gc
import itertools
import sys
import warnings
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.runfiles.records import TensorView, TensorViews
from harness.worker.heapgraph.search import Referrers, is_args

PIN_RATIO = 4  # a storage this many times its largest owned view is pinned by views
TENSOR_MIN_STORAGE = 1_000_000  # bytes; smaller pinned storages are only summed
TOP_VIEWS = 3  # pinned storages the report names an owner path for
TENSOR_CHECKS = 256  # base tensors checked for a Python owner (one referrers scan)

Groups = dict[tuple[str, int], list[Any]]  # (device, data pointer) -> [nbytes, tensors]
# storage bytes, its largest owned view's bytes, tensors on it, that view
Pinned = tuple[int, int, int, Any]


@dataclass(frozen=True)
class StorageLevels:
    """What the tensors sampler writes: tensors, their unique storage, the pinned part."""

    tensors: int
    storage_bytes: int
    pinned_bytes: int


def tensor_types(root: type) -> frozenset[type]:
    """``root`` and all its subclasses (``Parameter``, user subclasses)."""
    found, todo = {root}, [root]
    while todo:
        subclasses: list[type] = todo.pop().__subclasses__()
        for sub in subclasses:
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return frozenset(found)


def view_bytes(tensor: Any) -> int:
    return int(tensor.numel()) * int(tensor.element_size())


def tensors_among(objects: list[object], kinds: frozenset[type]) -> list[object]:
    """The objects whose type is one of ``kinds``.

    The walk is most of the census's cost and runs in C from start to end
    (list over compress over map), so it never lets go of the GIL: a recorded
    program's threads cannot run while every object is held by ``objects``, as
    objects they drop meanwhile would stay alive (a tree's unlinked nodes would
    count as detached but alive). The caller drops ``objects`` as it returns."""
    return list(itertools.compress(objects, map(kinds.__contains__, map(type, objects))))


def group_by_storage(tensors: list[object]) -> tuple[Groups, dict[int, int], int]:
    """``tensors`` by storage, the ids of live views' bases, and how many could not be read.

    Meta tensors have no storage and are left out. A function of its own so
    that no loop variable outlives it: the reference counts read next must see
    the same references on every tensor."""
    storages: Groups = {}
    bases: dict[int, int] = {}
    unreadable = 0
    for obj in tensors:
        try:
            if obj.is_meta:  # type: ignore[attr-defined]
                continue
            storage = obj.untyped_storage()  # type: ignore[attr-defined]
            key = (str(obj.device), int(storage.data_ptr()))  # type: ignore[attr-defined]
            nbytes = int(storage.nbytes())
            base = obj._base  # type: ignore[attr-defined]
        except Exception:  # sparse, or a subclass without a storage
            unreadable += 1
            continue
        if base is not None:
            bases[id(base)] = 0
        storages.setdefault(key, [nbytes, []])[1].append(obj)
    return storages, bases, unreadable


def pinned_storages(groups: Groups, owned: Callable[[object], bool]) -> list[Pinned]:
    """The storages at least PIN_RATIO times their largest ``owned`` tensor.

    A storage none of whose tensors is owned is nobody's (its tensors are
    going), and counts as not pinned."""
    pinned: list[Pinned] = []
    for nbytes, sharing in groups.values():
        held = [t for t in sharing if owned(t)]
        if not held:
            continue
        largest = max(held, key=view_bytes)
        view = view_bytes(largest)
        if nbytes >= PIN_RATIO * max(view, 1):
            pinned.append((nbytes, view, len(sharing), largest))
    return pinned


# -- the periodic census: ownership by reference count --------------------------------------


def count_base_refs(storages: Groups, bases: dict[int, int]) -> None:
    """Each live base's reference count, into ``bases`` (held by: the object list,
    its group, the loop, the call; one more for every Python owner)."""
    for entry in storages.values():
        for tensor in entry[1]:
            if id(tensor) in bases:
                bases[id(tensor)] = sys.getrefcount(tensor)


def owned_by_refcount(bases: dict[int, int], orphan_refs: int) -> Callable[[object], bool]:
    """Ownership read from :func:`count_base_refs`: a tensor that is no live view's base,
    or a base with more references than one only its views keep (``orphan_refs``)."""
    return lambda tensor: bases.get(id(tensor), orphan_refs + 1) > orphan_refs


def storage_levels(tensors: list[object], orphan_refs: int) -> StorageLevels:
    """Storage and pinned bytes of ``tensors`` (:func:`tensors_among` the live objects).

    ``orphan_refs``: the reference count :func:`count_base_refs` reads on a base
    that only its views keep (:func:`orphan_refcount`); a base with more has an owner.
    """
    storages, bases, _ = group_by_storage(tensors)
    count_base_refs(storages, bases)
    pinned = pinned_storages(storages, owned_by_refcount(bases, orphan_refs))
    return StorageLevels(
        sum(len(sharing) for _, sharing in storages.values()),
        sum(nbytes for nbytes, _ in storages.values()),
        sum(nbytes - view for nbytes, view, _, _ in pinned),
    )


def orphan_refcount(torch: Any, kinds: frozenset[type]) -> int:
    """What :func:`count_base_refs` reads on a base only its view keeps: measured on a
    probe made that way, since it depends on how PyTorch keeps such a base.

    The census's own references are the same whatever else it holds, so the probe
    and its base stand in for a walk of every object."""
    probe = torch.arange(PIN_RATIO * 4)[:1]
    base_id = id(probe._base)
    tensors = tensors_among([probe, probe._base], kinds)
    storages, bases, _ = group_by_storage(tensors)
    count_base_refs(storages, bases)
    del probe
    return bases.get(base_id, 0)


# -- the report at the end of a run: ownership by referrers ---------------------------------


@dataclass
class Tensors:
    """The tensor report, and what the owner search needs from the tensor pass."""

    summary: TensorViews | None = None
    views: list[TensorView] = field(default_factory=list)  # owner paths still to find
    example: TensorView | None = None  # the largest pinned storage, for "oversized"
    # the largest view on each storage of ``views``, then of ``example``: where the
    # owner search starts; the caller drops them once it has them
    tensors: list[object] = field(default_factory=list)
    # id(base) -> the live views whose ``_base`` it is: a base tensor whose Python
    # object only its views keep (through C++) is reached through them
    base_views: dict[int, list[object]] = field(default_factory=dict)


def tensor_report(
    objects: list[object], referrers: Referrers = gc.get_referrers,
    held: Container[int] = (), ignore: Iterable[int] = (),
) -> Tensors:
    """Count, view bytes and unique storage bytes of the tensors alive in the GC, and
    the storages kept alive only by views far smaller than they are.

    Which bases have Python owners takes one ``referrers`` scan over at most
    TENSOR_CHECKS of them (the largest storages); an unchecked base counts as
    owned, and so does one whose id is in ``held`` (a local of a running
    function, which no scan sees); ``ignore``: ids of the caller's containers
    (its samples), owners of nothing. Empty when the workload did not import torch.
    """
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    report = Tensors()
    if not isinstance(tensor_type, type):
        return report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensors = tensors_among(objects, tensor_types(tensor_type))
        viewed, unviewed = _total_view_bytes(tensors)
        groups, _, unreadable = group_by_storage(tensors)
        unreadable += unviewed
        # An empty storage pins nothing and is no storage of the report's.
        storages = {key: entry for key, entry in groups.items() if entry[0]}
        own = {id(objects), id(tensors), id(groups), id(storages), *ignore}
        own.update(id(entry[1]) for entry in groups.values())
        pinned = _pinned(storages, own, referrers, report.base_views, held)
        report.summary = {
            "count": len(tensors),
            "view_bytes": viewed,
            "storage_bytes": sum(e[0] for e in storages.values()),
            "storages": len(storages),
            "oversized": {
                "storages": len(pinned),
                "view_bytes": sum(view for _, view, _, _ in pinned),
                "storage_bytes": sum(nbytes for nbytes, _, _, _ in pinned),
            },
            "views": [],
        }
        if unreadable:
            report.summary["unreadable"] = unreadable
        pinned.sort(key=lambda p: p[1] - p[0])  # the most bytes kept beyond the view first
        large = [p for p in pinned if p[0] >= TENSOR_MIN_STORAGE]
        report.views = [_view(*p) for p in large[:TOP_VIEWS]]
        report.tensors = [p[3] for p in large[:TOP_VIEWS]]
        if pinned:  # the worst of them, however small: many small ones add up too
            report.example = _view(*pinned[0])
            report.tensors.append(pinned[0][3])
        pinned.clear()
        tensors.clear()
        storages.clear()
        groups.clear()
    return report


def _total_view_bytes(tensors: list[object]) -> tuple[int, int]:
    """The view bytes of ``tensors``, and how many could not be read."""
    total = failed = 0
    for tensor in tensors:
        try:
            total += view_bytes(tensor)
        except Exception:  # a subclass whose numel or element_size raises
            failed += 1
    return total, failed


def _pinned(
    storages: Groups, own: set[int], referrers: Referrers,
    base_views: dict[int, list[object]], held: Container[int],
) -> list[Pinned]:
    """:func:`pinned_storages` with bases owned as :func:`owned_by_referrers` finds them."""
    bases: dict[int, object] = {}
    for _, tensors in storages.values():
        on = {id(t) for t in tensors}
        for tensor in tensors:
            base = base_of(tensor)
            if base is not None and id(base) in on:
                bases[id(base)] = base
                base_views.setdefault(id(base), []).append(tensor)
    own.update((id(bases), id(base_views)))
    own.update(id(views) for views in base_views.values())
    unheld = {i: b for i, b in bases.items() if i not in held}
    own.add(id(unheld))
    owned = owned_by_referrers(storages, unheld, own, referrers)
    owned.update(i for i in bases if i in held)
    unheld.clear()
    pinned = pinned_storages(storages, lambda t: id(t) not in bases or id(t) in owned)
    bases.clear()
    return pinned


def owned_by_referrers(
    storages: Groups, bases: dict[int, object], own: set[int], referrers: Referrers,
) -> set[int]:
    """Ids of the base tensors some Python object refers to (or that were not checked)."""
    if not bases:
        return set()
    by_size = sorted(
        ((nbytes, id(t)) for nbytes, tensors in storages.values() for t in tensors
         if id(t) in bases),
        reverse=True,
    )
    checked = [bases[i] for _, i in by_size[:TENSOR_CHECKS]]
    owned = {i for _, i in by_size[TENSOR_CHECKS:]}
    ids = {id(t) for t in checked}
    own.update((id(checked), id(ids), id(owned)))
    for referrer in referrers(*checked):
        if id(referrer) in own or is_args(referrer, checked):
            continue
        owned.update(id(r) for r in gc.get_referents(referrer) if id(r) in ids)
    checked.clear()
    return owned


def _view(nbytes: int, view: int, shared: int, tensor: Any) -> TensorView:
    """A pinned storage's entry; who holds the view is filled in by the owner search."""
    return {
        "view_bytes": view,
        "storage_bytes": nbytes,
        "ratio": round(nbytes / view, 1) if view else None,
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype),
        "device": str(tensor.device),
        "tensors_on_storage": shared,
        "path": None,
        "root": None,
    }


def base_of(obj: object) -> object:
    """A tensor view's ``_base`` (held through C++, so no referent the GC lists)."""
    if not callable(getattr(type(obj), "untyped_storage", None)):
        return None
    try:
        return getattr(obj, "_base", None)
    except Exception:
        return None


def storage_bytes(obj: object, seen: set[int]) -> int:
    """A tensor's storage bytes, counted once per storage (``seen`` holds data pointers)."""
    if not callable(getattr(type(obj), "untyped_storage", None)):
        return 0
    try:
        storage = obj.untyped_storage()  # type: ignore[attr-defined]
        key = int(storage.data_ptr())
        if key in seen:
            return 0
        seen.add(key)
        return int(storage.nbytes())
    except Exception:  # a storage-less or meta tensor: nothing to count
        return 0
