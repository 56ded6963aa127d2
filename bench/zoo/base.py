"""ZooCache: the plain RadixCache plus a ledger, the base of every zoo target.

Built exactly as ``refcache.factories.radix_cache`` builds the control cache
(a ``SlotAllocator`` of ``kv_size`` tokens, ``page_size``, ``inject``), so a
zoo target differs from the fixed cache only at the site its kind overrides.
``stats()`` adds the gauge ``zoo_ledger_bytes`` (see ``ledger.py``) and
whatever a kind adds through :meth:`ZooCache.zoo_stats`.

It also counts the requests it has handed out and not yet taken back
(``alloc_request`` succeeded, ``cache_finished_req`` not yet called): with
none in flight the scheduler is idle, which is when an idle check runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.zoo.ledger import QUANTUM, Ledger
from refcache.pools import SlotAllocator
from refcache.radix import RadixCache
from refcache.req import Req

LEDGER_GAUGE = "zoo_ledger_bytes"


class ZooCache(RadixCache):
    def __init__(
        self,
        kv_size: int,
        page_size: int = 1,
        inject: Sequence[str] = (),
        rate: float = 0.0,
        quantum: int = QUANTUM,
    ) -> None:
        super().__init__(SlotAllocator(kv_size), page_size, tuple(inject))
        self.ledger = Ledger(rate, quantum)
        self.in_flight = 0

    def alloc_request(self, req: Req) -> bool:
        admitted = super().alloc_request(req)
        self.in_flight += admitted
        return admitted

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        super().cache_finished_req(req, is_insert)
        self.in_flight -= 1

    def zoo_stats(self) -> dict[str, float]:
        """hook: extra gauges of a kind (all present from the first call)."""
        return {}

    def stats(self) -> dict[str, float]:
        return {**super().stats(), LEDGER_GAUGE: float(self.ledger.total), **self.zoo_stats()}


def check_no_options(target: str, options: dict[str, object]) -> None:
    """Zoo targets take the options they name; anything else is a typo, not a no-op."""
    if options:
        raise TypeError(f"zoo target {target} does not take {sorted(options)}")
