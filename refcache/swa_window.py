"""Sliding-window helpers shared by SWARadixCache and the Unified cache's SWA component.

SWA layers only read the last ``sliding_window`` tokens, so a match may end
only where that window is SWA-resident (``window_match``), and a lock takes
SWA refs over the last window only (``lock_window``). As in SGLang the node
where a locked window ends carries a ``swa_uuid``, recorded per lock on the
locked node (``swa_lock_uuids``), so the unlock stops there even after splits
move it. Requests own the SWA slots of their tokens past the cached prefix
(``req.aux["swa_indices"]``, see ``own_swa``); an insert hands them to the tree
node by node (``next_segment``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch

from refcache.pools import SlotAllocator
from refcache.req import Req

_swa_uuids = itertools.count(1)
_NONE = torch.empty(0, dtype=torch.int64)
NodeTest = Callable[[Any], bool]
NodeAction = Callable[[Any], None]


def own_swa(req: Req) -> torch.Tensor:
    """SWA slots the request owns: ``[i]`` is the slot of token ``prefix_len + i``."""
    slots: torch.Tensor = req.aux.get("swa_indices", _NONE)
    return slots


def window_match(
    root: Any, last: Any, window: int, holds: NodeTest, usable: NodeTest | None = None
) -> tuple[Any, int]:
    """The deepest node on the path to ``last`` a match may end at, and its depth.

    Its last ``window`` tokens must all hold SWA KV (``holds``), or its whole
    path must: past a tombstone a request could not attend over its window.
    ``usable`` adds a condition of another component (Unified: a Mamba state).
    """
    path = []
    while last is not root:
        path.append(last)
        last = last.parent
    best, best_depth, depth = root, 0, 0
    since_tombstone: float = float("inf")  # no tombstone yet: any depth is usable
    for node in reversed(path):
        depth += len(node.value)
        since_tombstone = since_tombstone + len(node.value) if holds(node) else 0
        if since_tombstone >= window and (usable is None or usable(node)):
            best, best_depth = node, depth
    return best, best_depth


def lock_window(node: Any, root: Any, window: int, lock: NodeAction) -> int | None:
    """``lock`` the nodes covering the last window; return the uuid where it ends."""
    covered = 0
    while node is not root:
        lock(node)
        covered += len(node.value)
        if covered >= window:
            if node.swa_uuid is None:
                node.swa_uuid = next(_swa_uuids)
            uuid: int = node.swa_uuid
            return uuid
        node = node.parent
    return None  # the whole path is shorter than the window: locked to the root


def unlock_window(node: Any, root: Any, uuid: int | None, unlock: NodeAction) -> None:
    """Undo ``lock_window``: stop at the node carrying ``uuid``."""
    while node is not root:
        unlock(node)
        if uuid is not None and node.swa_uuid == uuid:
            return
        node = node.parent


def take_window_lock(node: Any, root: Any, window: int, lock: NodeAction) -> None:
    """A lock taken at ``node``: lock its window and remember where the window ends."""
    node.swa_lock_uuids.append(lock_window(node, root, window, lock))


def release_window_lock(node: Any, root: Any, unlock: NodeAction) -> None:
    """Undo the latest ``take_window_lock`` at ``node``."""
    if not node.swa_lock_uuids:
        raise AssertionError(f"dec_lock_ref on node {node.id} that holds no lock")
    unlock_window(node, root, node.swa_lock_uuids.pop(), unlock)


def next_segment(extra: dict[str, Any], length: int) -> tuple[torch.Tensor | None, bool]:
    """Step an insert past a node of ``length`` tokens; return the caller's SWA
    slots for it (None: the tree owned them all already) and whether they cover
    the whole node (only then may a tombstone be revived with them)."""
    start: int = extra["offset"]
    base: int = extra["swa_from"]
    end = extra["offset"] = start + length
    if end <= base:
        return None, False
    lo = max(start, base)
    slots: torch.Tensor = extra["swa_owned"][lo - base : end - base].clone()
    return slots, lo == start


def revive_or_free(
    extra: dict[str, Any],
    node: Any,
    tombstone: bool,
    give: Callable[[Any, torch.Tensor], None],
    pool: SlotAllocator,
) -> None:
    """Step an insert past a matched node: a tombstone whose whole segment the
    caller owns is revived with those slots (the window before the new tokens
    is whole); other caller slots duplicate the tree's and are freed."""
    slots, whole = next_segment(extra, len(node.key))
    if slots is not None and tombstone and whole:
        give(node, slots)
    elif slots is not None:
        pool.free(slots)


def leaf_segment(extra: dict[str, Any], length: int) -> torch.Tensor:
    """``next_segment`` for a new leaf, whose SWA slots must all be the caller's."""
    slots, whole = next_segment(extra, length)
    if slots is None or not whole:
        raise AssertionError("a new leaf cannot start inside the caller's cached prefix")
    return slots
