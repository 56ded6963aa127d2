"""Leaks of Python objects: kept token lists, small records, cycles of evicted nodes.

Each keeps objects whose size ``sys.getsizeof`` gives exactly and books them
in the ledger as it keeps them.
"""

from __future__ import annotations

import gc
import sys
import time
import weakref
from collections.abc import Sequence
from typing import Any

from bench.zoo.base import ZooCache
from bench.zoo.ledger import SMALL_INTS, fresh_tokens, list_bytes, tokens_for
from refcache.keys import RadixKey
from refcache.radix_tree import MatchResult
from refcache.req import Req


class DictRetention(ZooCache):
    """``cache_finished_req`` keeps the finished request's token ids in a dict by rid.

    As a metrics or debugging hook that forgot to pop: ``finished_tokens``
    never shrinks. Each kept list holds the request's ids (cycled when the
    debt is larger than the request) as fresh ints, so the ledger counts the
    list, its ints and the dict's growth exactly.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.finished_tokens: dict[int, list[int]] = {}

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        owed = self.ledger.owed()
        if owed:
            kept = fresh_tokens(req.token_ids, tokens_for(owed))
            before = sys.getsizeof(self.finished_tokens)
            self.finished_tokens[req.rid] = kept
            grown = sys.getsizeof(self.finished_tokens) - before
            key = 0 if req.rid in SMALL_INTS else sys.getsizeof(req.rid)
            self.ledger.add(list_bytes(kept) + grown + key)
        super().cache_finished_req(req, is_insert)


# A match record: when, which node, how long; three fresh floats in a tuple.
Record = tuple[float, float, float]
RECORD_BYTES = sys.getsizeof((0.0, 0.0, 0.0)) + 3 * sys.getsizeof(0.0)


class SmallObjects(ZooCache):
    """``match_prefix`` appends a small access record per match to a log never trimmed.

    Tuples of floats are well under 512 bytes, so CPython's small-object
    allocator serves them from its own mmapped arenas: glibc's mallinfo2
    does not see them, ``sys.getallocatedblocks()`` and RSS do. The ledger
    counts the records (tuple and floats) and the log's own growth.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.match_log: list[Record] = []

    def match_prefix(self, key: RadixKey) -> MatchResult:
        result = super().match_prefix(key)
        owed = self.ledger.owed()
        if owed:
            self._log(result, max(1, owed // RECORD_BYTES))
        return result

    def _log(self, result: MatchResult, count: int) -> None:
        before = sys.getsizeof(self.match_log)
        node_id = float(result.last_device_node.id)
        length = float(len(result.device_indices))
        for _ in range(count):
            self.match_log.append((time.monotonic(), node_id + 0.0, length + 0.0))
        grown = sys.getsizeof(self.match_log) - before
        self.ledger.add(count * RECORD_BYTES + grown)


class EvictRecord:
    """What eviction remembers of a node: the node, its tokens, the next one evicted."""

    __slots__ = ("__weakref__", "next", "node", "tokens")

    def __init__(self, node: Any, tokens: list[int]) -> None:
        self.node, self.tokens = node, tokens
        self.next: EvictRecord | None = None


class EvictedCycles(ZooCache):
    """``_evict_leaf`` (inside ``evict``) ties each paid-for evicted node into a cycle.

    The evicted node points at an ``EvictRecord`` that points back at it, and
    the previous record points at the new one, as the stale LRU pointers of
    incident 1 chained evicted nodes together. Nothing reachable holds any of
    it. Why the chain: radix-steady turns its tree over in about a second, so
    most evicted nodes are still young (measured: 26 of 32), and a lone young
    cycle dies in the next gen-0 or gen-1 collection, unlike production's
    long-lived nodes. The first record of a chain is held until a collection
    of generation 1 or 2 has run (it then sits in generation 2) and is let
    go; from then on its pointer keeps every later record alive through young
    collections (they count it as an outside reference), so the whole chain
    is freed only by a gen-2 collection, as production's cycles were.

    The ledger counts what enters cycles (record, its token list, the node's
    shell), cumulatively; the gauge ``zoo_cycles_alive_bytes`` is the part the
    GC has not freed yet. The node's ``parent`` is dropped so a cycle holds
    only what it counts (a kept parent would also hold evicted ancestors).
    Payments are large (64 KiB by default) so the node's uncounted ints are
    noise.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.alive_bytes = 0
        # A weakref hashes as its referent did, so a dead one still finds its entry.
        self._alive: dict[weakref.ref[EvictRecord], int] = {}
        self._last: weakref.ref[EvictRecord] | None = None  # weak: the chain stays garbage
        self._anchor: EvictRecord | None = None  # a new chain's first record, until it is old
        gc.callbacks.append(self._aged)

    def _aged(self, phase: str, info: dict[str, int]) -> None:
        """After a gen-1 or gen-2 collection the held first record is in gen 2: let it go."""
        if phase == "stop" and info["generation"] >= 1:
            self._anchor = None

    def close(self) -> None:
        if self._aged in gc.callbacks:
            gc.callbacks.remove(self._aged)
        super().close()

    def _evict_leaf(self, x: Any) -> int:
        freed = super()._evict_leaf(x)
        owed = self.ledger.owed()
        if owed:
            self._tie(x, fresh_tokens(x.key.token_ids, tokens_for(owed)))
        return freed

    def _tie(self, node: Any, tokens: list[int]) -> None:
        node.parent = None
        record = EvictRecord(node, tokens)
        node.evict_record = record  # the cycle: node -> record -> node
        last = self._last() if self._last is not None else None
        if last is None:
            self._anchor = record  # a new chain (the last one was collected)
        else:
            last.next = record
        size = sys.getsizeof(record) + list_bytes(tokens) + node_shell_bytes(node)
        self._last = weakref.ref(record, self._freed)
        self._alive[self._last] = size
        self.alive_bytes += size
        self.ledger.add(size)

    def _freed(self, ref: weakref.ref[EvictRecord]) -> None:
        self.alive_bytes -= self._alive.pop(ref, 0)

    def zoo_stats(self) -> dict[str, float]:
        return {"zoo_cycles_alive_bytes": float(self.alive_bytes)}


def node_shell_bytes(node: Any) -> int:
    """A tree node's own objects: the node, its dicts, its key and its index tensor."""
    parts: Sequence[object] = (node, vars(node), node.children, node.key, node.key.token_ids)
    tensor = node.value
    storage = 0 if tensor is None else sys.getsizeof(tensor) + tensor.untyped_storage().nbytes()
    return sum(sys.getsizeof(p) for p in parts) + storage
