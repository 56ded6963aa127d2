"""What the scheduler keeps per request: waiting in the queue, or running.

Its own module so that overlap decode (``scenarios.workloads.overlap``), which the
scheduler imports, can name a running request without importing the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refcache.req import Req
from scenarios.workloads.exits import FINISH, Fate
from scenarios.workloads.traffic import Request


@dataclass
class Waiting:
    request: Request
    since: int  # the step it (re)joined the queue
    fate: Fate = field(default_factory=lambda: Fate(FINISH))
    req: Req | None = None  # made when first matched or admitted
    generated: list[int] = field(default_factory=list)  # what it decoded before a retraction
    session: Any = None  # the streaming session it is a turn of (scenarios.workloads.sessions)


@dataclass
class Running:
    req: Req
    request: Request
    prompt_len: int
    generated: list[int] = field(default_factory=list)
    denoise_left: int = 0  # dLLM: steps before the block in flight settles
    fate: Fate = field(default_factory=lambda: Fate(FINISH))
    left: str | None = None  # how it left (a batch in flight still names it after)
