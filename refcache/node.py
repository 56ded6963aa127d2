"""The base tree node shared by every cache's ``TreeNode``.

Each cache module defines its own ``TreeNode`` subclass (as SGLang does), so
garbage and object counts show the familiar type name. Nodes keep a ``__dict__``
on purpose: the production leak's garbage was TreeNodes plus their dicts, keys,
lists and index tensors, and we want the same shape.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from refcache.keys import RadixKey

_ids = itertools.count(1)
_clock = itertools.count(1)


def tick() -> int:
    """A strictly increasing access time (no wall clock: runs stay deterministic)."""
    return next(_clock)


class BaseNode:
    def __init__(self) -> None:
        self.children: dict[Any, Any] = {}
        self.parent: Any = None
        self.key: RadixKey = RadixKey(())
        self.value: torch.Tensor | None = None
        self.lock_ref = 0
        self.last_access_time = tick()
        self.hit_count = 0
        self.prev: Any = None
        self.next: Any = None
        self.id = next(_ids)

    @property
    def evicted(self) -> bool:
        return self.value is None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id}, len={len(self.key)})"
