"""The host tier's books, counted from SGLang's own structures.

SGLang's idle checkers (0.5.23: ``managers/scheduler_components/invariant_checker.py``;
0.5.11 and 0.5.17: ``check_memory``) count the device pools, the request rows and the
tree, never the host pool. The host books here apply their formula to it, as the
reference caches do: free slots + the tree's host copies + the slots in-flight storage
work may hold must equal the pool's size. The device books gain ``in_transfer``: the
tokens locked only by the cache's own copies in flight (write-through, load back).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from refcache.pools import PoolAccount
from refcache.req import Req

if TYPE_CHECKING:
    from scenarios.sglang.handles import HandleCache as _Base
else:
    _Base = object

PREFETCH_TRIED = "sglang_prefetch_tried"  # req.aux: its prefetch was issued (once per request)


def host_books(size: int, available: int, evictable: int, protected: int,
               in_flight_at_most: int) -> PoolAccount:
    """The host pool's books: free slots, the tree's host copies (``evictable``: of
    nodes only on the host; ``protected``: of nodes also on the device) and the slots
    in-flight storage work may hold (prefetch staging, the release queue), counted as
    ``in_transfer`` up to ``in_flight_at_most``. SGLang's storage threads trim and
    release that staging while the books are read, so it is bounded, not counted: a
    slot held by nothing SGLang tracks still shows as books short."""
    residual = size - available - evictable - protected
    held = max(0, min(residual, in_flight_at_most))
    return PoolAccount(size, available, evictable, protected + held, in_transfer=held)


def queued(queue: Any) -> list[Any]:
    """A snapshot of a ``queue.Queue``'s items, under its own lock (threads put into it)."""
    with queue.mutex:
        return list(queue.queue)


class PrefetchCensus:
    """Every live ``PrefetchOperation``, in a WeakSet (its ``__init__`` wrapped once per
    process, as the node census does; nothing about it changes). A terminated prefetch
    leaves SGLang's ``ongoing_prefetch`` at once, but its storage threads keep the
    operation until they are done with it, and only then release the host slots it did
    not fill: those slots are in flight, held by an operation no table names."""

    def __init__(self, controller: Any) -> None:
        from scenarios.sglang.handles import NodeCensus

        self._census = NodeCensus()
        for cls in operation_classes(controller):
            self._census.watch(cls)

    def host_slots(self) -> int:
        """Host slots the live operations hold (the threads trim them as they go)."""
        return sum(staged(getattr(op, "host_indices", None)) for op in list(self._census.nodes))

    def close(self) -> None:
        self._census.unwatch()


def operation_classes(controller: Any) -> list[type]:
    """The prefetch operation classes a cache controller may make: its own module's
    (0.5.23's and 0.5.17's ``HybridCacheController`` define their own, outside the base
    class's line) and ``managers/cache_controller.py``'s."""
    import sys

    classes: list[type] = []
    for cls in type(controller).__mro__:
        found = getattr(sys.modules.get(cls.__module__), "PrefetchOperation", None)
        if isinstance(found, type) and found not in classes:
            classes.append(found)
    return classes


def drop_pending(controller: Any) -> None:
    """At shutdown, the storage work still queued (prefetch lookups and reads, backups) is
    dropped, as the controller's own ``reset`` clears those queues: SGLang's detach then
    stops its threads at once instead of letting the prefetch thread drain its queue."""
    for name in ("prefetch_queue", "prefetch_buffer", "backup_queue"):
        pending = getattr(controller, name, None)
        if pending is not None:
            with pending.mutex:
                pending.queue.clear()


def staged(indices: Any) -> int:
    """Slots a tensor of host indices (or None) stands for."""
    return 0 if indices is None else len(indices)


def transfer_locked(nodes: Iterable[Any], root: Any, lock_of: Callable[[Any], int],
                    tokens_of: Callable[[Any], int]) -> int:
    """Device tokens locked by copies in flight and by nothing else: each copy holds
    one lock on its node's path to the root, so a node whose lock count is no more
    than the copies below it is unlocked once they complete."""
    copies: dict[int, int] = {}
    on_path: dict[int, Any] = {}
    for node in nodes:
        while node is not None and node is not root:
            copies[id(node)] = copies.get(id(node), 0) + 1
            on_path[id(node)] = node
            node = node.parent
    return sum(tokens_of(n) for i, n in on_path.items() if lock_of(n) <= copies[i])


class HostTierBooks(_Base, metaclass=abc.ABCMeta):
    """The host tier's books, gauges and shutdown over SGLang's own structures, shared by
    both adapters (mixed in before ``HandleCache`` / ``LegacyCache``). Each adapter says
    where its release keeps things: ``_kv_values`` and ``_mamba_values`` (a node's device
    and host values), ``_prefetch_staging`` (an ``ongoing_prefetch`` entry's host
    indices), ``_mamba_host_pool`` (or None), ``_transfer_nodes`` (the nodes of the
    write-throughs and load backs in flight) and ``_kv_lock``."""

    cc: Any  # SGLang's cache controller
    storage: Any  # hostglue.FileStorage or None
    operations: PrefetchCensus

    def __init__(self, *args: Any, storage: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = storage
        self.cc = self.cache.cache_controller
        self.operations = PrefetchCensus(self.cc)

    @abc.abstractmethod
    def _prefetch_once(self, req: Req, sreq: Any) -> None:
        """``Scheduler._prefetch_kvcache`` as this adapter's release calls it, once per
        request; starts with ``_prefetch_due``."""

    def _prefetch_due(self, req: Req, sreq: Any) -> bool:
        """Whether the request's storage prefetch is issued now: once per request (SGLang:
        at queue entry), after the match without ``cow_mamba`` that names its nodes."""
        if req.aux.get(PREFETCH_TRIED) or not self.cache.enable_storage:
            return False
        req.aux[PREFETCH_TRIED] = True
        sreq.init_next_round_input(self.cache, cow_mamba=False)
        self._waiting[req.rid] = sreq  # a waiting Req: its match names nodes, unlocked
        return True

    def match_waiting_req(self, req: Req) -> None:
        self._prefetch_once(req, self._sgl(req))
        super().match_waiting_req(req)

    @abc.abstractmethod
    def _kv_values(self, node: Any) -> tuple[Any, Any]:
        """Where this adapter's release keeps it (see the class docstring)."""

    @abc.abstractmethod
    def _mamba_values(self, node: Any) -> tuple[Any, Any]:
        """Where this adapter's release keeps it (see the class docstring)."""

    @abc.abstractmethod
    def _prefetch_staging(self, entry: Any) -> Any:
        """Where this adapter's release keeps it (see the class docstring)."""

    @abc.abstractmethod
    def _mamba_host_pool(self) -> Any:
        """Where this adapter's release keeps it (see the class docstring)."""

    @abc.abstractmethod
    def _transfer_nodes(self) -> list[Any]:
        """Where this adapter's release keeps it (see the class docstring)."""

    @abc.abstractmethod
    def _kv_lock(self, node: Any) -> int:
        """Where this adapter's release keeps it (see the class docstring)."""

    @abc.abstractmethod
    def _host_lock(self, node: Any, mamba: bool) -> int:
        """The node's host lock count for its KV copy (or its Mamba state's copy)."""

    @abc.abstractmethod
    def _lock_anchors(self) -> list[Any]:
        """The nodes SGLang's tables of work in flight name (storage backups, prefetches,
        load backs, write-throughs): the host locks they took are theirs until done."""

    def locked_copies(self) -> dict[str, int]:
        """Host slots of copies a host lock holds that no work in flight explains (the
        protocol's ``locked_copies``, read after a quiet stretch). A lock is the work's if
        its node or a descendant is named by a table of work in flight: a lock held over
        a node that later splits holds the new parent too. A storage backlog (backups
        queued behind a slow store) is work in flight, not a lost release."""
        from scenarios.sglang.handles import walk

        explained: set[int] = set()
        for node in self._lock_anchors():
            while node is not None and id(node) not in explained:
                explained.add(id(node))
                node = node.parent
        locked = [node for node in walk(self.root_node)
                  if node is not self.root_node and id(node) not in explained]
        out = {"host": sum(staged(self._kv_values(n)[1]) for n in locked
                           if self._host_lock(n, mamba=False) > 0)}
        if self._mamba_host_pool() is not None:
            out["mamba_host"] = sum(staged(self._mamba_values(n)[1]) for n in locked
                                    if self._host_lock(n, mamba=True) > 0)
        return out

    def _held(self, values: Callable[[Any], tuple[Any, Any]]) -> tuple[int, int, int, int]:
        """Host slots of nodes only on the host (evictable) and of nodes also on the
        device (protected); nodes with a host copy, nodes only on the host."""
        from scenarios.sglang.handles import walk

        evictable = protected = backed = evicted = 0
        for node in walk(self.root_node):
            if node is self.root_node:
                continue
            value, host = values(node)
            if host is None:
                continue
            backed += 1
            if value is None:
                evictable += len(host)
                evicted += 1
            else:
                protected += len(host)
        return evictable, protected, backed, evicted

    def _in_flight_at_most(self) -> int:
        """Host slots in-flight storage work may hold: the staging of the prefetches in
        SGLang's table and of every live prefetch operation, and the release queue."""
        if not self.cache.enable_storage:
            return 0
        held = sum(staged(self._prefetch_staging(entry))
                   for entry in list(self.cache.ongoing_prefetch.values()))
        held += self.operations.host_slots()
        return held + sum(len(p) for p in queued(self.cc.host_mem_release_queue))

    def pool_accounting(self) -> dict[str, PoolAccount]:
        books = super().pool_accounting()
        nodes = self._transfer_nodes()
        if nodes:
            locked = transfer_locked(nodes, self.root_node, self._kv_lock,
                                     lambda n: staged(self._kv_values(n)[0]))
            books["full"] = dataclasses.replace(books["full"], in_transfer=locked)
        pool = self.cc.mem_pool_host
        evictable, protected, _, _ = self._held(self._kv_values)
        books["host"] = host_books(int(pool.size), int(pool.available_size()),
                                   evictable, protected, self._in_flight_at_most())
        states = self._mamba_host_pool()
        if states is not None:  # HiMamba / FULL+MAMBA: host state slots, held by nodes
            evictable, protected, _, _ = self._held(self._mamba_values)
            books["mamba_host"] = host_books(int(states.size), int(states.available_size()),
                                             evictable, protected, 0)
        return books

    def stats(self) -> dict[str, float]:
        out = super().stats()
        cache, pool = self.cache, self.cc.mem_pool_host
        evictable, protected, backed, evicted = self._held(self._kv_values)
        out.update(host_available=float(pool.available_size()),
                   host_used=float(pool.size - pool.available_size()),
                   host_evictable=float(evictable), host_protected=float(protected),
                   backed_up_nodes=float(backed), evicted_nodes=float(evicted),
                   writes_in_flight=float(len(cache.ongoing_write_through)),
                   loads_in_flight=float(len(cache.ongoing_load_back)),
                   prefetches_in_flight=float(len(cache.ongoing_prefetch)),
                   backups_in_flight=float(len(cache.ongoing_backup)))
        if cache.enable_storage:
            out["prefetch_tokens_occupied"] = float(self.cc.prefetch_tokens_occupied)
        return out

    def notes(self) -> list[str]:
        return [*super().notes(),
                "host books: SGLang's idle checkers count no host pool; here free host "
                "slots + the tree's host copies + what in-flight storage work may hold "
                "(prefetch staging, the release queue) must equal the host pool's size"]

    def close(self) -> None:
        try:
            if self.cache.enable_storage:
                drop_pending(self.cc)
                self.cache.detach_storage_backend()  # stops SGLang's storage threads
        finally:
            super().close()
            self.operations.close()
            if self.storage is not None:
                self.storage.close()
