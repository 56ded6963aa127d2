"""Speculative decoding (EAGLE): drafts proposed, verified, the rejected ones' slots freed.

SGLang's EAGLE worker has a small draft model propose a few tokens per request
and step; the verify step (``EagleVerifyInput``) runs the target model over them
with KV slots allocated for every draft (the batch's ``out_cache_loc``), accepts
a prefix of them and frees the rejected drafts' slots, so a request's KV grows
by a varying number of tokens each step. Here one verify step of a request is
``extend_request(req, drafts)`` (its drafts take KV slots, and SWA slots on an
SWA cache), an acceptance length drawn from a seeded stream (each next draft
accepted with ``accept_rate`` after the first, which the target's own token
always makes good), then ``reject_draft_tokens(req, n)`` for the rest.

Under EAGLE SGLang also keys its radix tree by bigrams (``is_eagle``): the
draft model's KV at a position depends on the next token too. The scenarios
offer the cache an ``eagle`` option for that; the reference's SWA and Unified
caches take it (``refcache.keys.bigram_key``).

Both are optional for a user's cache (``scenarios.workloads.protocol``): without
``reject_draft_tokens(req, n)`` the run decodes token by token and its notes say
why (``speculation_not_taken``); a cache whose ``uses_bigram_keys()`` is missing
or False runs speculation on its own keys, and the notes say the bigram-key
paths were not exercised (``bigram_keys_not_taken``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from refcache.req import Req
from scenarios.workloads.protocol import as_bool

CALL = "reject_draft_tokens(req, n)"
ACTIVITY = {"spec_verified": "speculative verify steps",
            "drafts_rejected": "draft tokens rejected (their slots freed)"}


@dataclass(frozen=True)
class Speculation:
    """EAGLE's shape: drafts per request and step (0: off), and how often they hold."""

    draft_tokens: int = 0
    accept_rate: float = 0.6  # chance each draft after the first is accepted, given the last was

    @property
    def on(self) -> bool:
        return self.draft_tokens > 0


def missing_call(cache: Any) -> str | None:
    """Why speculation cannot run on ``cache``, or None."""
    if callable(getattr(cache, "reject_draft_tokens", None)):
        return None
    return (f"the cache has no {CALL}, so rejected drafts' slots could not be given back; "
            "it decodes token by token")


def bigram_note(cache: Any) -> str | None:
    """Why EAGLE's bigram keys are not exercised on ``cache``, or None when they are."""
    uses = getattr(cache, "uses_bigram_keys", None)
    if callable(uses) and as_bool("uses_bigram_keys()", uses()):
        return None
    return ("the cache does not say its tree is keyed by bigrams (uses_bigram_keys() "
            "missing or False): speculation runs on its own keys, EAGLE's bigram-key paths "
            "are not exercised")


class SpeculativeDecode:
    """One verify step per running request and decode step; counts what it did."""

    def __init__(self, cache: Any, spec: Speculation, seed: int) -> None:
        self.cache, self.spec = cache, spec
        self._accepts = random.Random(f"speculation-{seed}")  # its own stream: same traffic
        self.verified = 0  # verify steps that committed tokens
        self.rejected = 0  # draft tokens whose slots went back

    def verify(self, req: Req, drafts: list[int]) -> list[int] | None:
        """Give the drafts their slots, accept a prefix, free the rest's; return the
        accepted tokens, or None when the pools had no room for the drafts."""
        if not self.cache.extend_request(req, drafts):
            return None
        accepted = self._accepted(len(drafts))
        self.cache.reject_draft_tokens(req, len(drafts) - accepted)
        self.verified += 1
        self.rejected += len(drafts) - accepted
        return drafts[:accepted]

    def _accepted(self, drafted: int) -> int:
        accepted = 1
        while accepted < drafted and self._accepts.random() < self.spec.accept_rate:
            accepted += 1
        return accepted
