"""A storage tier below the host ("L3" in SGLang's HiCache: a file or remote backend).

Pages are named by a hash chained over the key's pages (SGLang's
``get_hash_str``: each page's hash covers every token before it), so a page
is only found under the same prefix. ``put`` stores host rows of whole pages
(storage backup, after a write to the host completes); ``hits`` counts how
many leading pages of a key are stored, and ``get`` returns their rows for a
prefetch into the host. Bounded: least recently stored pages go first, as a
disk cache's capacity would make them; the rows live in one buffer allocated
up front, so storing moves no heap.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch

PageHash = int


def page_hashes(tokens: Sequence[int], page_size: int, prior: PageHash = 0) -> list[PageHash]:
    """One hash per whole page of ``tokens``, each chained over the pages before it."""
    hashes, last = [], prior
    for start in range(0, len(tokens) - page_size + 1, page_size):
        last = hash((last, tuple(tokens[start : start + page_size])))
        hashes.append(last)
    return hashes


class StorageTier:
    """Page rows by chained hash in a fixed buffer of ``capacity_pages`` pages."""

    def __init__(self, capacity_pages: int, page_size: int = 1, row_elems: int = 8) -> None:
        if capacity_pages <= 0:
            raise ValueError(f"storage capacity must be positive, got {capacity_pages}")
        self.capacity_pages = capacity_pages
        self.page_size = page_size
        # Preallocated, as a disk file would be: storing a page moves no heap.
        self.rows = torch.zeros((capacity_pages * page_size, row_elems), dtype=torch.float16)
        self.slots: OrderedDict[PageHash, int] = OrderedDict()  # hash -> page slot, LRU first

    def put(self, hashes: Sequence[PageHash], rows: torch.Tensor) -> None:
        """Store the rows of whole pages (``len(hashes) * page_size`` rows)."""
        for n, h in enumerate(hashes):
            slot = self._slot_for(h)
            start = slot * self.page_size
            self.rows[start : start + self.page_size] = rows[n * self.page_size :
                                                             (n + 1) * self.page_size]

    def _slot_for(self, h: PageHash) -> int:
        if h in self.slots:
            self.slots.move_to_end(h)
            return self.slots[h]
        if len(self.slots) < self.capacity_pages:
            slot = len(self.slots)
        else:
            _, slot = self.slots.popitem(last=False)  # the least recently stored page goes
        self.slots[h] = slot
        return slot

    def hits(self, hashes: Sequence[PageHash]) -> int:
        """How many leading pages of ``hashes`` are stored."""
        count = 0
        for h in hashes:
            if h not in self.slots:
                break
            count += 1
        return count

    def get(self, hashes: Sequence[PageHash]) -> torch.Tensor:
        starts = [self.slots[h] * self.page_size for h in hashes]
        return torch.cat([self.rows[s : s + self.page_size] for s in starts])

    def __len__(self) -> int:
        return len(self.slots)
