"""Memory that grows and is not a leak: a bounded memo, a sawtooth, a cache filling up.

The harness must pass these. Their ledger is what they hold now (it rises
and falls, bounded), not a paced total: their ``rate`` is 0.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from typing import Any

from bench.zoo.base import ZooCache
from refcache.keys import RadixKey
from refcache.radix_tree import MatchResult

MEMO_ENTRIES = 4096
MEMO_VALUE_BYTES = 1024
SAWTOOTH_BYTES = 16 << 20
SAWTOOTH_PERIOD_S = 4.0
FILL = b"\xa5"


class BoundedMemo(ZooCache):
    """``match_prefix`` memoizes a per-prefix digest in an LRU dict of ``memo_entries``.

    It fills within seconds (every match of a fresh prompt adds an entry),
    then holds ``memo_entries`` values and evicts the oldest: a plateau.
    The ledger counts values, keys and the dict's table.
    """

    def __init__(
        self,
        *args: Any,
        memo_entries: int = MEMO_ENTRIES,
        value_bytes: int = MEMO_VALUE_BYTES,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.memo_entries, self.value_bytes = memo_entries, value_bytes
        self.memo: OrderedDict[int, bytes] = OrderedDict()
        self._table = sys.getsizeof(self.memo)

    def match_prefix(self, key: RadixKey) -> MatchResult:
        result = super().match_prefix(key)
        digest = hash(key.token_ids)
        if digest in self.memo:
            self.memo.move_to_end(digest)
        else:
            self._remember(digest)
        return result

    def _remember(self, digest: int) -> None:
        value = FILL * self.value_bytes  # a new bytes object: the memoized result
        self.memo[digest] = value
        self.ledger.add(entry_bytes(digest, value))
        while len(self.memo) > self.memo_entries:
            old_digest, old = self.memo.popitem(last=False)
            self.ledger.remove(entry_bytes(old_digest, old))
        table = sys.getsizeof(self.memo)
        self.ledger.add(table - self._table)
        self._table = table


def entry_bytes(digest: int, value: bytes) -> int:
    return sys.getsizeof(digest) + sys.getsizeof(value)


class Sawtooth(ZooCache):
    """``check_hicache_events`` stages a flush into a large buffer, then releases it.

    Every ``period_s`` the buffer (``sawtooth_bytes``, written so it is
    resident) is built and held for half the period, then dropped: memory
    rises and falls and never accumulates. The ledger is the bytes held now.
    """

    def __init__(
        self,
        *args: Any,
        sawtooth_bytes: int = SAWTOOTH_BYTES,
        period_s: float = SAWTOOTH_PERIOD_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.sawtooth_bytes, self.period_s = sawtooth_bytes, period_s
        self.buffer: bytearray | None = None
        self._started = time.monotonic()

    def check_hicache_events(self) -> None:
        super().check_hicache_events()
        phase = (time.monotonic() - self._started) % self.period_s
        holding = phase < self.period_s / 2
        if holding and self.buffer is None:
            self.buffer = bytearray(FILL) * self.sawtooth_bytes
            self.ledger.add(self.sawtooth_bytes)
        elif not holding and self.buffer is not None:
            self.buffer = None
            self.ledger.remove(self.sawtooth_bytes)


class FillingCache(ZooCache):
    """The fixed cache with a pool big enough that the tree grows for a minute.

    Nothing is evicted until the pool is full, so nodes, keys and index
    tensors accumulate at the traffic's pace, then stop: growth bounded by
    capacity, which a short run cannot tell from a leak without knowing the
    bound. Measured on radix-steady (2 runs at once on 2 cores): the pool is
    full of tokens at about 26 s, and eviction then splits the tree into more,
    shorter nodes until about 85 s (91,700 to 93,200), its C heap growing
    7 MB with them. The ledger counts the bytes of the cached tokens' KV indices
    (8 per token; the nodes and keys around them are not counted).
    """

    def stats(self) -> dict[str, float]:
        self.ledger.total = 8 * (self.full_evictable_size_ + self.full_protected_size_)
        return super().stats()
