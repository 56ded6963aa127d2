"""Synthetic LLM-serving traffic with the prefix sharing real traffic has.

Four request shapes, mixed by weight: a shared system prompt plus a fresh user
turn; multi-turn chats whose next turn extends the whole previous exchange;
few-shot templates (a fixed block of examples plus a question); agent loops
that append tool outputs to a growing transcript. Prompts and conversations are
picked with Zipf-like popularity; lengths are log-normal. Everything derives
from one seeded ``random.Random``, so a seed fixes the whole stream.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import cache


@dataclass(frozen=True)
class TrafficShape:
    """Knobs of the request stream (token counts are per segment)."""

    vocab: int = 32000
    system_prompts: int = 8
    system_len: float = 48.0  # median tokens of a system prompt
    turn_len: float = 24.0  # median tokens of a user turn
    output_len: float = 16.0  # median tokens the model generates
    sigma: float = 0.6  # log-normal spread of all lengths
    zipf_s: float = 1.1  # popularity skew of prompts and conversations
    conversations: int = 64  # live multi-turn chats / agent transcripts
    max_context: int = 512  # a chat longer than this starts over
    mix: tuple[float, float, float, float] = (0.35, 0.35, 0.15, 0.15)  # system/chat/fewshot/agent
    # Conversations start under way, each at a length drawn uniformly up to
    # max_context, as a server's are at any moment in its steady state. Started
    # from their system prompts, the rarely picked ones took minutes to reach
    # their usual lengths: a fill of the histories (lists past 64 tokens live in
    # the C heap) that a 60 s run of the fixed cache read as 1-2 MB/h of heap growth.
    primed: bool = True


@cache
def vocabulary(size: int) -> tuple[int, ...]:
    """Every token id of a ``size``-token vocabulary, each one int object made once.

    Ids above 256 are not cached by CPython: drawn fresh, every token of every
    prompt and reply was its own Python block, so the blocks a run held rose and
    fell by thousands with the requests waiting in the queue (a standard
    deviation of about 1,100 blocks on mamba-sessions, half that with shared
    ids). That wander is the workload's, not the cache's, and it hid a
    ``py_blocks`` budget of 1,390 blocks per 20 s run. Built before the run's
    baseline, so the table itself is not growth.
    """
    return tuple(range(size))


def draw_tokens(rng: random.Random, vocab: int, n: int) -> list[int]:
    """``n`` token ids drawn uniformly (the same draws as ``rng.randrange(vocab)``)."""
    ids, pick = vocabulary(vocab), rng.randrange
    return [ids[pick(vocab)] for _ in range(n)]


@dataclass
class Request:
    prompt: list[int]
    output_len: int
    conversation: int | None = None


@dataclass
class Traffic:
    """An endless, deterministic stream of requests."""

    shape: TrafficShape
    rng: random.Random
    _prompts: list[list[int]] = field(default_factory=list)
    _fewshot: list[list[int]] = field(default_factory=list)
    _history: dict[int, list[int]] = field(default_factory=dict)
    _weights: list[float] = field(default_factory=list)

    @classmethod
    def seeded(cls, seed: int, shape: TrafficShape | None = None) -> Traffic:
        traffic = cls(shape or TrafficShape(), random.Random(seed))
        traffic._prompts = [
            traffic._tokens(traffic.shape.system_len) for _ in range(traffic.shape.system_prompts)
        ]
        traffic._fewshot = [traffic._tokens(traffic.shape.system_len * 3) for _ in range(3)]
        n = max(traffic.shape.conversations, traffic.shape.system_prompts)
        traffic._weights = [1.0 / (rank + 1) ** traffic.shape.zipf_s for rank in range(n)]
        if traffic.shape.primed:
            traffic._history = {conv: traffic._under_way(conv)
                                for conv in range(traffic.shape.conversations)}
        return traffic

    def _under_way(self, conv: int) -> list[int]:
        """Conversation ``conv``'s history at a point of its cycle drawn uniformly."""
        history = list(self._prompts[conv % len(self._prompts)])
        length = self.rng.uniform(len(history), self.shape.max_context)
        while len(history) < length:
            history += self._tokens(self.shape.turn_len) + self._tokens(self.shape.output_len)
        return history

    def _length(self, median: float) -> int:
        return max(1, round(self.rng.lognormvariate(math.log(median), self.shape.sigma)))

    def _tokens(self, median: float) -> list[int]:
        return draw_tokens(self.rng, self.shape.vocab, self._length(median))

    def _popular(self, n: int) -> int:
        return self.rng.choices(range(n), weights=self._weights[:n])[0]

    def next_request(self) -> Request:
        kind = self.rng.choices(range(4), weights=self.shape.mix)[0]
        out = self._length(self.shape.output_len)
        if kind == 0:
            system = self._prompts[self._popular(len(self._prompts))]
            return Request(system + self._tokens(self.shape.turn_len), out)
        if kind == 2:
            examples = self._fewshot[self.rng.randrange(len(self._fewshot))]
            return Request(examples + self._tokens(self.shape.turn_len / 2), out)
        conv = self._popular(self.shape.conversations)
        seg = self.shape.turn_len if kind == 1 else self.shape.turn_len * 3  # tool outputs are long
        return Request(self._continue(conv) + self._tokens(seg), out, conv)

    def _continue(self, conv: int) -> list[int]:
        history = self._history.get(conv)
        if history is None or len(history) > self.shape.max_context:
            history = list(self._prompts[conv % len(self._prompts)])
            self._history[conv] = history
        return list(history)

    def record_reply(self, request: Request, output: list[int]) -> None:
        """A finished chat turn becomes the prefix of that conversation's next turn."""
        if request.conversation is not None:
            self._history[request.conversation] = request.prompt + output
