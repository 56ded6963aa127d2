"""Radix keys: token sequences with an optional extra-key namespace.

Children are keyed by ``child_key``: the first token when ``page_size == 1``,
otherwise the tuple of the first page, so two keys that share a first page land
on the same child. An ``extra_key`` (e.g. a LoRA id or a cache salt) namespaces
the whole tree: keys with different extra keys never share a node.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RadixKey:
    """A token sequence and its namespace."""

    token_ids: tuple[int, ...]
    extra_key: str | None = None

    @classmethod
    def of(cls, tokens: Sequence[int], extra_key: str | None = None) -> RadixKey:
        return cls(tuple(tokens), extra_key)

    def __len__(self) -> int:
        return len(self.token_ids)

    def __getitem__(self, item: slice) -> RadixKey:
        return RadixKey(self.token_ids[item], self.extra_key)


BIGRAM_SHIFT = 32  # token ids are below 2**32: a bigram packs two into one int


def bigram_key(tokens: Sequence[int], extra_key: str | None = None) -> RadixKey:
    """EAGLE's radix key: the bigrams ``(t[i], t[i+1])`` of ``tokens``, one entry fewer
    than the tokens they span (SGLang's ``RadixKey(is_bigram=True)``).

    Each bigram is packed into one int, so the tree compares, splits and hashes
    bigrams as it does tokens; entry ``i``'s value is the KV slot of token ``i``.
    """
    pairs = itertools.pairwise(tokens)
    return RadixKey(tuple((a << BIGRAM_SHIFT) | b for a, b in pairs), extra_key)


def child_key(key: RadixKey, page_size: int) -> Hashable:
    """The dict key under which a node with this key sits in its parent."""
    head: Hashable = key.token_ids[0] if page_size == 1 else key.token_ids[:page_size]
    return head if key.extra_key is None else (key.extra_key, head)


def match_length(a: RadixKey, b: RadixKey, page_size: int) -> int:
    """Length of the common prefix of two keys, rounded down to whole pages."""
    if a.extra_key != b.extra_key:
        return 0
    n = min(len(a), len(b))
    i = 0
    ta, tb = a.token_ids, b.token_ids
    while i < n and ta[i] == tb[i]:
        i += 1
    return i - i % page_size


def page_aligned(length: int, page_size: int) -> int:
    return length - length % page_size
