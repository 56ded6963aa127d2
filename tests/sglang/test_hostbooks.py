"""The host tier's books (scenarios/sglang/hostbooks.py): pure functions, no SGLang."""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from scenarios.sglang.hostbooks import host_books, queued, staged, transfer_locked
from scenarios.sglang.hostglue import STALE_BUILD_LOCK_S, remove_stale_locks


def test_host_books_balance_with_staging_in_flight_counted_up_to_its_bound() -> None:
    # 100 slots: 40 free, 30 on host-only nodes, 20 copies of device nodes, 10 staged.
    books = host_books(100, 40, 30, 20, in_flight_at_most=25)
    assert books.mismatch == 0 and books.in_transfer == 10 and books.protected == 30


def test_slots_held_by_nothing_tracked_show_as_books_short() -> None:
    books = host_books(100, 40, 30, 20, in_flight_at_most=0)
    assert books.mismatch == -10  # lost: no tree node, no staging names them
    assert host_books(100, 40, 30, 20, in_flight_at_most=4).mismatch == -6


def test_a_tree_counting_more_than_is_allocated_is_books_over() -> None:
    assert host_books(100, 60, 30, 20, in_flight_at_most=50).mismatch == 10


def test_staged_and_queued() -> None:
    assert staged(None) == 0 and staged(torch.arange(7)) == 7
    q: queue.Queue[int] = queue.Queue()
    for i in range(3):
        q.put(i)
    assert queued(q) == [0, 1, 2] and q.qsize() == 3  # read, not drained


def _chain(*locks: int) -> list[SimpleNamespace]:
    root = SimpleNamespace(parent=None, lock=1, tokens=0)
    nodes, parent = [], root
    for lock in locks:
        parent = SimpleNamespace(parent=parent, lock=lock, tokens=10)
        nodes.append(parent)
    return [root, *nodes]


def test_transfer_locked_counts_only_what_copies_alone_hold() -> None:
    root, _a, b = _chain(1, 1)
    # One write-through on b: a and b are locked by it alone.
    assert transfer_locked([b], root, lambda n: n.lock, lambda n: n.tokens) == 20
    root, _a, b = _chain(2, 1)  # a request holds a as well: only b is the copy's
    assert transfer_locked([b], root, lambda n: n.lock, lambda n: n.tokens) == 10
    assert transfer_locked([], root, lambda n: n.lock, lambda n: n.tokens) == 0


def test_a_build_lock_a_killed_build_left_is_removed_and_a_fresh_one_kept(
        tmp_path: Path) -> None:
    """torch's extension loader waits for ever on a lock file: one older than any build
    can take was left by a killed build (a hung run on every later host-tier build)."""
    old, fresh = tmp_path / "old_ext" / "lock", tmp_path / "fresh_ext" / "lock"
    for lock in (old, fresh):
        lock.parent.mkdir()
        lock.touch()
    then = time.time() - STALE_BUILD_LOCK_S - 5
    os.utime(old, (then, then))
    assert remove_stale_locks(tmp_path) == [old]
    assert not old.exists() and fresh.exists()
