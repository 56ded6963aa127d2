"""Slow leaks beside the tree's own turnover (issue 42, item 4), for ``--target``.

    leak-harness run radix-steady --target bench.zoo.slow_targets:finished_dict --duration 60s
    leak-harness run radix-steady --target bench.zoo.slow_targets:token_tensors --duration 60s

At 20-35 MB/h a leak grows about as fast, inside a few seconds' allocation
window, as the healthy tree's churn sites do (the LRU's member dict, new
nodes' keys), so "Where it grows" must tell them apart by what each keeps over
the windows, not by its rate. Both leak on the paths a serving stack forgets:

- ``finished_dict``: ``cache_finished_req`` keeps each finished request's
  token ids in a dict by rid (a metrics hook that forgot to pop), the zoo's
  ``DictRetention`` at ``SLOW_RATE``;
- ``token_tensors``: ``cache_finished_req`` keeps a tensor of each finished
  request's output ids in a list (a debugging trace never trimmed): the
  tensor's data is native memory, its Python shell and the list are what the
  allocation windows see.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch

from bench.zoo.base import ZooCache, check_no_options
from bench.zoo.python_leaks import DictRetention
from refcache.keys import RadixKey
from refcache.req import Req

MB = 1e6
SLOW_RATE = 28 * MB  # bytes per hour: inside issue 42's 20-35 MB/h
TENSOR_QUANTUM = 1024  # bytes: a request's tail is a few hundred tokens


class FinishedKeys(ZooCache):
    """``cache_finished_req`` keeps the finished request's key in ``finished`` by rid.

    The key (``req.key()``: a ``RadixKey`` over a tuple of the ids) is made by the
    reference's own code, so what the leak keeps is allocated at ``refcache/keys.py``,
    the same line the tree's churn allocates its nodes' keys at; only the dict's
    own growth is made at the leak's line. Paid per finished request while the
    ledger owes at least a quantum, booked by the key's and the dict's sizes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.finished: dict[int, RadixKey] = {}

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        if self.ledger.owed():
            before = sys.getsizeof(self.finished)
            key = req.key()
            self.finished[req.rid] = key
            grown = sys.getsizeof(self.finished) - before
            self.ledger.add(sys.getsizeof(key) + sys.getsizeof(key.token_ids) + grown)
        super().cache_finished_req(req, is_insert)


class TokenTensors(ZooCache):
    """``cache_finished_req`` keeps a tensor of the request's ids in ``traces``.

    Paid per finished request while the ledger owes at least a quantum: the ids
    (cycled to the debt's size) become one int64 tensor, booked by its storage.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.traces: list[torch.Tensor] = []

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        owed = self.ledger.owed()
        if owed:
            ids = torch.tensor(req.token_ids or [0], dtype=torch.int64)
            kept = ids.repeat(-(-owed // ids.untyped_storage().nbytes()))
            self.traces.append(kept)
            self.ledger.add(kept.untyped_storage().nbytes())
        super().cache_finished_req(req, is_insert)


def finished_dict(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
                  rate: float = SLOW_RATE, **options: Any) -> DictRetention:
    """Finished requests' token ids kept in a dict by rid, at ``rate`` bytes per hour."""
    check_no_options("finished_dict", options)
    return DictRetention(kv_size, page_size, inject, rate=rate)


def finished_keys(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
                  rate: float = SLOW_RATE, **options: Any) -> FinishedKeys:
    """Finished requests' keys kept in a dict by rid, at ``rate`` bytes per hour."""
    check_no_options("finished_keys", options)
    return FinishedKeys(kv_size, page_size, inject, rate=rate, quantum=TENSOR_QUANTUM)


def token_tensors(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
                  rate: float = SLOW_RATE, **options: Any) -> TokenTensors:
    """Finished requests' ids kept as tensors in a list, at ``rate`` bytes per hour."""
    check_no_options("token_tensors", options)
    return TokenTensors(kv_size, page_size, inject, rate=rate, quantum=TENSOR_QUANTUM)
