"""Asynchronous storage prefetch, as SGLang's HiRadixCache runs it.

When a request joins the queue, the cache starts bringing the stored pages
after its device and host hit into host slots (``prefetch_from_storage``): it
protects the host node the prefetch hangs under (``host_ref_counter``, which
host eviction skips), takes the host slots, records the operation in
``ongoing_prefetch[rid]`` and adds the tokens to ``prefetch_tokens_occupied``.
The copy completes over event rounds. Before admitting the request the
scheduler asks ``check_prefetch_progress``; by the policy the request waits
for the copy or cuts it short (``terminate_prefetch``), and the pages that
arrived become a host node. Everything the prefetch took is given back then,
or by ``release_aborted_request`` when the request leaves the queue first.
While ``prefetch_tokens_occupied`` is at the capacity limit no new prefetch
starts (``prefetch_rate_limited``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from refcache.keys import RadixKey

POLICIES = ("best_effort", "wait_complete", "timeout")


@dataclass
class PrefetchOperation:
    """One prefetch in flight: where it hangs, what it brings, the host slots it took."""

    node: Any  # the host node the new pages go under (protected while in flight)
    key: RadixKey  # the page-aligned new tokens
    host: torch.Tensor  # one host slot per token of ``key``
    hashes: list[int]  # the chained page hashes of ``key``
    stored: int  # leading tokens of ``key`` the storage has
    started: int  # the event round it started at
    page_size: int

    def completed_tokens(self, now: int, ticks: int) -> int:
        """Tokens copied by round ``now``: whole pages arrive evenly over ``ticks`` rounds."""
        if ticks <= 0 or now - self.started >= ticks:
            return self.stored
        done = self.stored * (now - self.started) // ticks
        return done - done % self.page_size


def ready(op: PrefetchOperation, policy: str, now: int, ticks: int, timeout: int) -> bool:
    """Whether the request may be admitted now, by SGLang's prefetch policies."""
    if policy == "best_effort":
        return True
    done = op.completed_tokens(now, ticks) >= op.stored
    if policy == "wait_complete":
        return done
    return done or now - op.started >= timeout
