"""Named regressions: each re-introduces one production incident at its real site.

The default is the fixed code. A cache receives the set of active regressions at
construction and its code takes the old path where the incident lived; there is
no "if injected: allocate garbage" anywhere. An incident whose site was SGLang's
scheduler, not its cache, lives in the harness's scheduler
(``scenarios.workloads.scheduler``), which receives the same set from the run;
``Regression.cache`` then names ``Scheduler``. Importing this module is cheap (no
torch), so the harness can list regressions without building a cache.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Regression:
    name: str
    incident: int
    cache: str  # the class whose code takes the old path
    description: str


_LRU = "LRU _remove_node rewires neighbours but leaves the removed node's {lst} pointers set"
_PP = (
    "work_list reaped non-blocking at the end of the round (only completed Works) "
    "instead of drained with wait() at the start"
)
_FRONTIER = (
    "SGLang #34870: with EAGLE's bigram keys, the out-of-window SWA frontier of an "
    "unfinished request is measured from its token count, not its key's length; at a page "
    "boundary the leaf the insert makes keeps less than a window of live SWA, the re-match "
    "stops short, cache_protected_len stops advancing and the next insert frees KV the "
    "tree still owns"
)

REGISTRY: dict[str, Regression] = {
    r.name: r
    for r in (
        Regression(
            "mamba-lru-unlink",
            1,
            "MambaRadixCache",
            _LRU.format(lst="prev/next and mamba_prev/mamba_next"),
        ),
        Regression(
            "swa-lru-unlink", 1, "SWARadixCache", _LRU.format(lst="prev/next and swa_prev/swa_next")
        ),
        Regression(
            "unified-lru-unlink",
            1,
            "UnifiedRadixCache",
            _LRU.format(lst="lru_prev[pt]/lru_next[pt]"),
        ),
        Regression(
            "himamba-stale-host-leaf",
            2,
            "HiMambaRadixCache",
            "write_backup and the host-leaf set as 0.5.10 ran them: a node is backed up "
            "whatever its parent (PR #22062 reverted), locked after the write is queued, and "
            "a host leaf unless a child is only on the host (PR #22592 reverted)",
        ),
        Regression("hiradix-pp-sync-no-drain", 3, "HiRadixCache", _PP),
        Regression(
            "mamba-slot-failed-schedule",
            7,
            "MambaRadixCache",
            "SGLang #16067: a request whose KV allocation fails keeps the Mamba state slot "
            "it was given",
        ),
        Regression(
            "mamba-abort-queued-slot",
            8,
            "MambaRadixCache",
            "SGLang #12693: a waiting request whose match forked the cached Mamba state into "
            "a slot of its own is aborted; the abort drops the request without freeing the slot",
        ),
        Regression(
            "hiradix-abort-prefetch",
            9,
            "HiRadixCache",
            "SGLang #9874: aborting a waiting request gives back nothing its storage prefetch "
            "took: the host node's ref, the host slots, the ongoing_prefetch entry and its "
            "share of prefetch_tokens_occupied (past the capacity limit, prefetch stops)",
        ),
        Regression(
            "overlap-retract-inflight-slot",
            10,
            "Scheduler",
            "SGLang #11981 (issue #11970, v0.5.3.post3): with overlap scheduling, the "
            "decode result processing skips a retracted request before freeing its slot "
            "in the batch that was in flight when it was retracted: one KV slot lost per "
            "retraction",
        ),
        Regression("unified-pp-sync-no-drain", 3, "UnifiedRadixCache", _PP),
        Regression(
            "unified-loadback-abort-mamba",
            15,
            "HiUnifiedRadixCache",
            "SGLang #30986 (fixed in v0.5.17): the Mamba component prepares a load back by "
            "giving the request a device state slot before the load is known to go through; "
            "a load called off (no room for the KV or the node's state) never gives it back",
        ),

        Regression(
            "hiradix-host-indices-view",
            5,
            "HiRadixCache",
            "SGLang #21624 (issue #19332): write_backup keeps the host pool's alloc() view of "
            "free_slots as the node's host_value; free() replaces free_slots by a cat, and "
            "every kept view pins the storage it came from",
        ),
        Regression(
            "radix-split-views",
            4,
            "RadixCache",
            "SGLang #17191: a new leaf keeps its slice of the request's KV indices and a "
            "split keeps both halves as slices, so every node's value is a view that pins "
            "the whole tensor it was cut from",
        ),
        Regression(
            "radix-dllm-inflight-block",
            6,
            "RadixCache",
            "SGLang #35270: cache_unfinished_req caches a diffusion LLM's in-flight denoise "
            "block, whose ids change every step while its slots stay: each draft's node holds "
            "the same slots, so evictable_size() counts them twice",
        ),
        Regression(
            "mamba-session-close-state",
            11,
            "StreamingSession",
            "SGLang #23496: closing a streaming session unlocks its prefix and frees its KV "
            "but never calls _free_slot_mamba: the session's Mamba state slot and its "
            "ping-pong track buffers (1 + ping_pong_size slots) are lost per close",
        ),
        Regression(
            "pd-abort-waiting-metadata",
            12,
            "Scheduler",
            "SGLang #17483: abort_request pops an aborted request from the PD prefill "
            "server's waiting queue without release_req_to_metadata_buffer: the metadata "
            "buffer index pop_bootstrapped took is never freed",
        ),
        Regression(
            "pd-bootstrap-failure-prefetch",
            13,
            "Scheduler",
            "SGLang #15439 (v0.5.7): pop_bootstrapped on KVPoll.Failed (a failed or aborted "
            "prefill bootstrap) never calls tree_cache.release_aborted_request: the storage "
            "prefetch started at queue entry keeps its host slots, its host node's ref, its "
            "ongoing_prefetch entry and its share of prefetch_tokens_occupied",
        ),
        Regression("swa-eagle-frontier", 14, "SWARadixCache", _FRONTIER),
        Regression("unified-eagle-frontier", 14, "UnifiedRadixCache", _FRONTIER),
    )
}


class UnknownRegression(ValueError):
    """A regression name that is not in the registry."""


def validate(names: Iterable[str]) -> frozenset[str]:
    """Return the names as a set, or raise with the closest known names."""
    chosen = frozenset(names)
    for name in sorted(chosen):
        if name not in REGISTRY:
            close = difflib.get_close_matches(name, list(REGISTRY), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            known = ", ".join(sorted(REGISTRY))
            raise UnknownRegression(f"unknown regression {name!r}.{hint} Known: {known}.")
    return chosen
