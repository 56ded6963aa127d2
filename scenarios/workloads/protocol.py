"""The cache protocol: everything a scenario asks of a cache.

Method names follow SGLang's ``BasePrefixCache``. To run the scenarios against
your own cache, write one factory ``make(inject: Sequence[str] = (), **options)``
returning an object with these methods and pass ``--target module:make``. The
requests the scheduler hands over are ``refcache.req.Req`` objects (token ids,
the KV slots they hold, the locked ``last_node``, an optional state slot).
``examples/own_cache.py`` wraps a cache with a different internal layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from refcache.pools import PoolAccount
from refcache.req import Req

# What the scheduler and the workload call on every cache: a target lacking any of
# them is refused before the run (and named, all at once, by ``leak-harness doctor``).
REQUIRED = (
    "match_prefix", "insert", "evict", "inc_lock_ref", "dec_lock_ref", "alloc_request",
    "extend_request", "cache_unfinished_req", "cache_finished_req", "check_hicache_events",
    "full_evictable_size", "full_protected_size", "stats", "close",
)


def missing_methods(cache: object) -> list[str]:
    """The required methods ``cache`` lacks (or has as non-callables), in protocol order."""
    return [name for name in REQUIRED if not callable(getattr(cache, name, None))]


class ProtocolError(TypeError):
    """A cache's call returned a value of the wrong type: the sentence names the call."""


def as_bool(call: str, value: Any) -> bool:
    """``value`` from ``call`` if it is a bool (numpy's too), else refuse: ``bool("no")``
    is True, so a wrong type would pass unnoticed."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise ProtocolError(f"the cache's {call} returned {type(value).__name__} {value!r:.40}, "
                        "not a bool")


def as_tables(value: Any) -> dict[str, list[int]]:
    """``request_tables()``'s value as {table: request ids}, or a sentence naming the call."""
    call = "request_tables()"
    if not isinstance(value, Mapping):
        raise ProtocolError(f"the cache's {call} returned {type(value).__name__}, not a "
                            "mapping of table name to request ids")
    tables: dict[str, list[int]] = {}
    for table, rids in value.items():
        if isinstance(rids, (str, bytes)) or not isinstance(rids, Iterable):
            raise ProtocolError(f"the cache's {call} gave table {table!r} as "
                                f"{type(rids).__name__} {rids!r:.40}, not request ids")
        tables[str(table)] = list(rids)
    return tables


class PrefixCache(Protocol):
    def match_prefix(self, key: Any) -> Any:
        """Longest cached prefix of ``key``: ``.device_indices``, ``.last_device_node``."""
        ...

    def insert(self, key: Any, value: Any, extra: dict[str, Any] | None = None) -> int:
        """Cache key -> KV slots; return how many leading tokens were cached already."""
        ...

    def evict(self, num_tokens: int, **per_pool: int) -> int:
        """Free at least ``num_tokens`` KV tokens from unlocked entries, LRU first."""
        ...

    def inc_lock_ref(self, node: Any) -> None: ...

    def dec_lock_ref(self, node: Any) -> None: ...

    def alloc_request(self, req: Req) -> bool:
        """Match and lock the request's prefix, allocate the rest; False when full."""
        ...

    def extend_request(self, req: Req, tokens: list[int]) -> bool:
        """Allocate KV for decoded tokens; False when full.

        Optional keyword ``slots`` (``extend_request(req, tokens, slots=...)``): the
        tokens take these slots, allocated before by ``alloc_tokens``, instead of new
        ones. Overlap scheduling needs it, with ``alloc_tokens`` and ``free_tokens``."""
        ...

    def alloc_tokens(self, n: int) -> Any:
        """Optional (overlap scheduling). ``n`` KV slots that no request holds yet, evicting
        first if the pool is short, or None: a decode batch's slots when it launches, one
        per token it will produce (SGLang's ``out_cache_loc``)."""
        ...

    def free_tokens(self, slots: Any) -> None:
        """Optional (overlap scheduling). Give back slots from ``alloc_tokens`` that no
        token took: a batch's slots for a request that finished or was retracted while the
        batch was in flight. Without this, ``alloc_tokens`` and ``extend_request(...,
        slots=...)``, overlap scheduling is not run."""
        ...

    def reject_draft_tokens(self, req: Req, n: int) -> None:
        """Optional (speculative decoding, ``scenarios.workloads.speculative``). The last
        ``n`` tokens ``extend_request`` gave ``req`` were drafts the verify step rejected:
        drop them from the request and give their slots back (SGLang frees the rejected
        drafts' ``out_cache_loc``). Without it a speculative scenario decodes token by
        token, and its notes say so (``speculation_not_taken``)."""
        ...

    def uses_bigram_keys(self) -> bool:
        """Optional (speculative decoding). Whether the tree is keyed by EAGLE's bigrams
        (pairs of consecutive tokens, one entry fewer than the tokens they span), which
        a speculative scenario asks of the factory with the keyword ``eagle=True``. A
        factory that takes no ``eagle`` is not given it; a cache without this method,
        or answering False, runs the scenario on its own keys and the notes say the
        bigram-key paths were not exercised (``bigram_keys_not_taken``)."""
        ...

    def cache_unfinished_req(self, req: Req) -> None:
        """Insert what the request has computed (chunked prefill) and re-lock."""
        ...

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        """Insert the finished request, release what the tree does not keep, unlock.

        ``is_insert=False`` is optional (SGLang's ``release_kv_cache(req, is_insert=False)``):
        a running request that was aborted, failed or is retracted caches
        nothing and gives back its own KV slots, its state and its lock. A cache
        whose method takes no ``is_insert`` is never sent down those paths."""
        ...

    def retract_request(self, req: Req, remaining: int = 0) -> None:
        """Optional. A running request is retracted (decode ran out of KV): give back its
        KV slots, state and lock without caching, make room for the ``remaining`` running
        requests, and keep the request ready to run again with the tokens it has (SGLang's
        ``release_req``: ``release_kv_cache``, ``evict_from_tree_cache``,
        ``reset_for_retract``). The scheduler re-queues the same ``req``, whose tokens
        include what it decoded. Without it, a retraction is
        ``cache_finished_req(req, is_insert=False)`` and the request comes back as a new one."""
        ...

    def release_aborted_request(self, req: Req) -> None:
        """Optional. A waiting request leaves (aborted, timed out, dropped): give back
        what it took while waiting (a forked state slot, a prefetch). Without it
        waiting requests are never aborted."""
        ...

    def match_waiting_req(self, req: Req) -> None:
        """Optional. The scheduling policy's prefix match of a waiting request before
        admission (a Mamba cache forks the matched state into a slot the request
        owns, ``req.state_slot``). Without it waiting requests are not matched early."""
        ...

    def open_session(self, session_id: Any) -> None:
        """Optional (streaming sessions, with ``close_session``). A client opens a session:
        its turns arrive as requests with ``req.session_id`` set, one at a time, each
        prompt the session's tokens so far plus a new message. The cache may keep a
        finished turn's memory (its KV past the tree's prefix, the lock on that prefix,
        its state slot) for the next turn, which then continues from it in
        ``alloc_request`` instead of matching and allocating afresh. A turn aborted
        mid-stream leaves by ``cache_finished_req(req, is_insert=False)`` and takes the
        session's kept memory with it. Without both calls the session load runs every
        arrival as a plain request and the run's notes say so (``sessions_not_taken``)."""
        ...

    def close_session(self, session_id: Any) -> None:
        """Optional (streaming sessions). The client closes the session (never while one
        of its turns waits or runs): give back everything it kept, KV, lock, state slot
        and any buffers. While a session is open at idle, what it keeps is held, not
        lost: count it in ``PoolAccount.session_held`` (its prefix lock in
        ``session_locked``) and list its slot ids in ``held_slots()``."""
        ...

    def check_hicache_events(self) -> None:
        """Consume host-tier completions (and sync them across PP ranks)."""
        ...

    def full_evictable_size(self) -> int: ...

    def full_protected_size(self) -> int: ...

    def pool_accounting(self) -> Mapping[str, PoolAccount]:
        """Optional. Each pool's books by name (``"full"``: device KV; then ``"mamba"``,
        ``"swa"``, ``"host"``... as the cache has them): size, available, evictable,
        protected (and ``in_transfer``, the protected part only copies in flight
        hold; ``session_held``, the slots open streaming sessions keep, and
        ``session_locked``, the part of ``protected`` their prefixes lock). The scheduler
        checks ``available + evictable + protected + session_held == size`` whenever no
        request runs; a cache without this method skips that check."""
        ...

    def locked_copies(self) -> Mapping[str, int]:
        """Optional. Per pool, the slots of the tree's own copies that a lock taken for
        work in flight still holds (a host copy locked while it is backed up to storage,
        loaded back or prefetched under: SGLang's ``protect_host``), leaving out locks
        whose work is still tracked as in flight. Read only at the end of a quiet
        stretch, where nothing is in flight: what is left is a lock no path released
        (``held_in_transfer``)."""
        ...

    def sanity_check(self, outstanding_kv: int = 0, outstanding_states: int = 0) -> None:
        """Optional. Raise AssertionError if tree, lists or pool accounting disagree
        (called at the end of a run, with nothing running)."""
        ...

    def check_prefetch_progress(self, req: Req) -> bool:
        """Optional. Whether a waiting request's storage prefetch lets it be admitted now
        (done, or cut short by the prefetch policy); False holds it in the queue."""
        ...

    def request_tables(self) -> Mapping[str, Any]:
        """Optional. Per-request tables by name, each the request ids it holds entries for
        (``{"ongoing_prefetch": [...]}``). At every idle moment an entry for a request
        that is neither waiting nor running is stale: ``stale_request_entries``."""
        ...

    def request_table_pools(self) -> Mapping[str, str]:
        """Optional. The pool each per-request table's entries hold slots of, by table
        (``{"ongoing_prefetch": "host"}``): a stale entry's report names the pool."""
        ...

    # Disaggregated prefill and decode (scenarios.workloads.disagg, pd-prefill and
    # pd-decode). All optional: a cache without them runs those scenarios as one engine,
    # and the run's notes say which PD paths were not run (``disagg_not_taken``).
    def alloc_metadata_buffer(self, req: Req) -> bool:
        """Optional (PD, both sides). A metadata row for the request (SGLang's
        ``ReqToMetadataIdxAllocator.alloc``): the prefill side takes it when the bootstrap
        succeeds, the decode side when it preallocates; False when none is free (the
        request waits). Book the rows in ``pool_accounting()`` and name the requests
        holding them in ``request_tables()``, so a row never given back shows."""
        ...

    def free_metadata_buffer(self, req: Req) -> None:
        """Optional (PD, both sides). Give the request's row back, if it holds one: at the
        end of its transfer (success or failure) and when it leaves a queue aborted."""
        ...

    def alloc_req_slot(self, req: Req) -> bool:
        """Optional (PD, decode side; with ``free_req_slot``). A request row for a request
        being preallocated (SGLang's ``DecodeReqToTokenPool``); False when none is free.
        The preallocated KV itself is ``alloc_request(req)``, released on a failed
        transfer by ``cache_finished_req(req, is_insert=False)``."""
        ...

    def free_req_slot(self, req: Req) -> None:
        """Optional (PD, decode side). Give the request's row back: after its transfer
        fails, when it finishes, is aborted or fails."""
        ...

    def stats(self) -> dict[str, float]:
        """Gauges by name (tree nodes, detached-but-alive nodes, list sizes, pools...)."""
        ...

    def close(self) -> None:
        """Release threads, peer processes and process groups."""
        ...
