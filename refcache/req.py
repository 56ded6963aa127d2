"""A request as the scheduler and the caches see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from refcache.keys import RadixKey


def _no_slots() -> torch.Tensor:
    return torch.empty(0, dtype=torch.int64)


@dataclass(eq=False)
class Req:
    """One request: its tokens and what it holds in the pools.

    ``kv_indices[i]`` is the KV slot of ``token_ids[i]``. The first
    ``prefix_len`` slots belong to the tree (matched or already inserted) and are
    protected by the lock on ``last_node``; the rest belong to the request.
    ``unsettled``: trailing tokens whose ids are not final yet (a diffusion
    LLM's in-flight denoise block, rewritten in place every step); a cache must
    not give them to the tree until they settle. ``session_id``: a streaming
    session's turn (``refcache.sessions``) runs on the session's memory.
    """

    rid: int
    token_ids: list[int]
    extra_key: str | None = None
    kv_indices: torch.Tensor = field(default_factory=_no_slots)
    prefix_len: int = 0
    last_node: Any = None
    state_slot: torch.Tensor | None = None  # Mamba state slot owned by the request
    unsettled: int = 0
    session_id: Any = None  # the streaming session this request is a turn of (None: none)
    aux: dict[str, Any] = field(default_factory=dict)

    def settled_len(self) -> int:
        """Tokens with slots whose ids are final: what may be cached."""
        return len(self.kv_indices) - self.unsettled

    def key(self, length: int | None = None) -> RadixKey:
        tokens = self.token_ids if length is None else self.token_ids[:length]
        return RadixKey.of(tokens, self.extra_key)
