"""Sliding-window helpers shared by SWARadixCache and the Unified cache's SWA component.

SWA layers only read the last ``sliding_window`` tokens, so a match may end
only where that window is SWA-resident (``window_match``), and a lock takes
SWA refs over the last window only (``lock_window``). As in SGLang the node
where a locked window ends carries a ``swa_uuid``, recorded per lock on the
locked node (``swa_lock_uuids``), so the unlock stops there even after splits
move it. Requests own the SWA slots of their tokens past the cached prefix
(``req.aux["swa_indices"]``, see ``own_swa``) from ``swa_start(req)`` on; an insert
hands them to the tree node by node (``next_segment``).

Out-of-window freeing (SGLang's ``free_swa_out_of_window_slots``, on by default
there since #34653; the caches' ``free_out_of_window`` option): before an
unfinished request's insert, the SWA slots of its tokens that slid out of every
window it will attend over go back (``release_out_of_window``) up to the
frontier (``swa_frontier``); the insert then gives the tree those tokens as an
SWA tombstone above a leaf that must keep a whole window live (``dead_head``).
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


def swa_start(req: Req) -> int:
    """The token ``own_swa(req)[0]`` belongs to: the end of the cached prefix, or later
    once the request's out-of-window slots were freed or the tree took its slots."""
    start: int = req.aux.get("swa_from", req.prefix_len)
    return start


def drop_own_swa(req: Req) -> torch.Tensor:
    """Forget the request's own SWA slots (the caller frees them); return them."""
    req.aux.pop("swa_from", None)
    slots: torch.Tensor = req.aux.pop("swa_indices", _NONE)
    return slots


def keep_own_swa(req: Req, slots: torch.Tensor, start: int) -> None:
    """The request's own SWA slots are now ``slots``, the first of them token ``start``'s."""
    req.aux["swa_indices"], req.aux["swa_from"] = slots, start


def swa_frontier(pre_len: int, window: int, page_size: int) -> int:
    """How far a running request's SWA may be freed: ``ceil_align(max(window, page))``
    tokens below ``page_floor(pre_len + 1)``, the end of the insert that follows when
    ``pre_len`` is its key's length less one. The leaf that insert makes then keeps a
    whole window of live SWA, so the match after the insert can end on it."""
    keep = -(-max(window, page_size) // page_size) * page_size
    return (pre_len + 1) // page_size * page_size - keep


def release_out_of_window(req: Req, frontier: int, pool: SlotAllocator) -> int:
    """Free the request's own SWA slots of the tokens before ``frontier``; return how
    many. Tokens the tree already holds are not the request's and stay."""
    start, own = swa_start(req), own_swa(req)
    n = min(frontier - start, len(own))
    if n <= 0:
        return 0
    pool.free(own[:n])
    keep_own_swa(req, own[n:].clone(), start + n)
    return n


def reject_swa(req: Req, n: int, pool: SlotAllocator) -> None:
    """Give back the SWA slots of the request's last ``n`` tokens (rejected drafts)."""
    own = own_swa(req)
    pool.free(own[len(own) - n :])
    keep_own_swa(req, own[: len(own) - n].clone(), swa_start(req))


def dead_head(extra: dict[str, Any], length: int) -> int:
    """Tokens at the head of a new leaf of ``length`` tokens whose SWA the caller freed
    out of window: the insert hangs them above the leaf as an SWA tombstone. The
    leaf itself must keep live SWA (a tombstone leaf could never be matched)."""
    dead = max(0, int(extra["swa_from"]) - int(extra["offset"]))
    if dead >= length > 0:
        raise AssertionError(f"a new leaf of {length} tokens would hold no SWA: the caller "
                             f"freed its window (SWA from token {extra['swa_from']})")
    return dead


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


def revival_split(extra: dict[str, Any], node: Any, tombstone: bool) -> int:
    """Where to split a matched tombstone whose tail only the caller holds SWA for (its
    head was freed out of window): SGLang's insert splits there and revives the tail,
    the head staying a tombstone. Return the head's length (0: no split)."""
    head = int(extra["swa_from"]) - int(extra["offset"])
    return head if tombstone and 0 < head < len(node.key) else 0


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
