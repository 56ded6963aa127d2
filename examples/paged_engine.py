"""A second example: a cache with requests of its own, behind a translation layer.

``PagedEngine`` is written the way serving engines often are: it knows nothing
of the harness. Its requests are ``Sequence`` objects with a block table
(page ids, 16 tokens a page), prefix sharing goes through a hash of full pages,
and its calls are ``allocate``, ``append``, ``commit`` and ``release``.

``HarnessAdapter`` is the only code written for leak-harness: it keeps one
``Sequence`` per harness request and answers the cache protocol
(``scenarios/workloads/protocol.py``) in the harness's terms, token slots
(``page * PAGE + offset``) instead of pages. Point the scenarios at it with::

    leak-harness doctor --target examples.paged_engine:make
    leak-harness run radix-steady --target examples.paged_engine:make

See ``docs/own-cache.md`` for the request lifecycle this adapter follows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

import torch

from refcache.pools import PoolAccount

PAGE = 16


# ----------------------------------------------------------------- the engine (yours)
@dataclass
class Page:
    pid: int
    key: int | None = None  # hash of the tokens up to and including this page, once full
    refs: int = 0


@dataclass(eq=False)
class Sequence:
    tokens: list[int]
    pages: list[Page] = field(default_factory=list)
    num_cached: int = 0  # leading tokens found in the prefix index at allocation


class PagedEngine:
    """Pages with reference counts; full pages are shared through a hash index."""

    def __init__(self, num_pages: int) -> None:
        self.pages = [Page(i) for i in range(num_pages)]
        self.free = list(range(num_pages))
        self.index: dict[int, Page] = {}  # full pages by the hash of their prefix
        self.unused: OrderedDict[int, Page] = OrderedDict()  # indexed pages nobody holds (LRU)

    def _take(self) -> Page | None:
        if not self.free and self.unused:  # evict the least recently used cached page
            _, page = self.unused.popitem(last=False)
            del self.index[page.key]  # type: ignore[arg-type]
            page.key = None
            self.free.append(page.pid)
        return self.pages[self.free.pop()] if self.free else None

    def _hold(self, page: Page) -> None:
        page.refs += 1
        self.unused.pop(page.pid, None)

    def _drop(self, page: Page) -> None:
        page.refs -= 1
        if page.refs == 0:
            if page.key is None:
                self.free.append(page.pid)
            else:
                self.unused[page.pid] = page

    def allocate(self, seq: Sequence) -> bool:
        """Share the cached full pages of the prompt, take new pages for the rest."""
        key = 0
        for start in range(0, len(seq.tokens) - PAGE + 1, PAGE):
            key = hash((key, tuple(seq.tokens[start : start + PAGE])))
            page = self.index.get(key)
            if page is None:
                break
            self._hold(page)
            seq.pages.append(page)
        seq.num_cached = len(seq.pages) * PAGE
        return self.append(seq, [], grow_only=True)

    def append(self, seq: Sequence, tokens: list[int], grow_only: bool = False) -> bool:
        """Room for ``tokens`` more; False (nothing taken) when pages run out."""
        need = -(-(len(seq.tokens) + len(tokens)) // PAGE) - len(seq.pages)
        taken: list[Page] = []
        for _ in range(need):
            page = self._take()
            if page is None:
                for back in taken:
                    self._drop(back)
                if grow_only:  # a failed allocation lets go of its shared pages too
                    self.release(seq)
                return False
            self._hold(page)
            taken.append(page)
        seq.pages += taken
        seq.tokens += tokens
        return True

    def commit(self, seq: Sequence) -> None:
        """Publish the sequence's full pages in the index (a page already there is
        shared: this sequence's copy is dropped for the cached one)."""
        key = 0
        for n, start in enumerate(range(0, len(seq.tokens) - PAGE + 1, PAGE)):
            key = hash((key, tuple(seq.tokens[start : start + PAGE])))
            page, cached = seq.pages[n], self.index.get(key)
            if cached is None and page.key is None:
                page.key, self.index[key] = key, page
            elif cached is not None and cached is not page:
                self._hold(cached)
                self._drop(page)
                seq.pages[n] = cached

    def release(self, seq: Sequence) -> None:
        for page in seq.pages:
            self._drop(page)
        seq.pages = []


# ------------------------------------------------- the translation layer (for leak-harness)
@dataclass
class Match:
    device_indices: torch.Tensor
    last_device_node: Any
    last_host_node: Any = None
    host_hit_length: int = 0


class HarnessAdapter:
    """The cache protocol over ``PagedEngine``: harness ``Req`` <-> engine ``Sequence``."""

    def __init__(self, engine: PagedEngine) -> None:
        self.engine = engine
        self.size = len(engine.pages) * PAGE
        self.seqs: dict[int, Sequence] = {}  # by request id, while the request runs

    def _slots(self, seq: Sequence, upto: int | None = None) -> torch.Tensor:
        count = len(seq.tokens) if upto is None else upto
        slots = [p.pid * PAGE + i for p in seq.pages for i in range(PAGE)]
        return torch.tensor(slots[:count], dtype=torch.int64)

    def _sync(self, req: Any, seq: Sequence) -> None:
        # What the scheduler reads after each call: the request's slots, how many
        # leading tokens the cache shares (it decides chunking), and the lock handle.
        req.kv_indices, req.prefix_len, req.last_node = self._slots(seq), seq.num_cached, seq

    def alloc_request(self, req: Any) -> bool:
        seq = Sequence(list(req.token_ids))
        if not self.engine.allocate(seq):
            return False
        self.seqs[req.rid] = seq
        self._sync(req, seq)
        return True

    def extend_request(self, req: Any, tokens: list[int]) -> bool:
        seq = self.seqs[req.rid]
        if not self.engine.append(seq, tokens):
            return False
        req.token_ids.extend(tokens)
        self._sync(req, seq)
        return True

    def _commit_settled(self, req: Any, seq: Sequence) -> int:
        """Publish the pages of the request's settled tokens; how many tokens that is.

        A diffusion LLM rewrites its in-flight block's ids in place
        (``req.unsettled`` trailing tokens): the engine's copy follows, and
        only settled tokens are published (a draft page in the index: #35270).
        """
        seq.tokens = list(req.token_ids)
        settled = req.settled_len()
        self.engine.commit(Sequence(seq.tokens[:settled], seq.pages))  # shares the page list
        return settled

    def cache_unfinished_req(self, req: Any) -> None:
        seq = self.seqs[req.rid]
        seq.num_cached = self._commit_settled(req, seq) // PAGE * PAGE
        self._sync(req, seq)

    def cache_finished_req(self, req: Any) -> None:
        seq = self.seqs.pop(req.rid)
        self._commit_settled(req, seq)
        self.engine.release(seq)
        req.last_node = None

    # The rest of the protocol, in engine terms.
    def match_prefix(self, key: Any) -> Match:
        probe = Sequence(list(key.token_ids))
        engine_key, pages = 0, []
        for start in range(0, len(probe.tokens) - PAGE + 1, PAGE):
            engine_key = hash((engine_key, tuple(probe.tokens[start : start + PAGE])))
            page = self.engine.index.get(engine_key)
            if page is None:
                break
            pages.append(page)
        probe.pages = pages
        return Match(self._slots(probe, len(pages) * PAGE), tuple(pages))

    def insert(self, key: Any, value: Any, extra: dict[str, Any] | None = None) -> int:
        """Publish the full pages behind ``value``'s slots; the leading tokens cached already.

        The scheduler caches through ``cache_*_req`` (``commit``); this serves callers
        that insert directly. Each page is named by its first slot, as ``_slots`` lays
        them out; the caller keeps its own references to the pages."""
        cached = int(self.match_prefix(key).device_indices.numel())
        full = len(key.token_ids) // PAGE * PAGE
        pages = [self.engine.pages[int(slot) // PAGE] for slot in value[:full:PAGE]]
        seq = Sequence(list(key.token_ids)[:full])
        for page in pages:
            self.engine._hold(page)
        seq.pages = pages
        self.engine.commit(seq)
        self.engine.release(seq)
        return cached

    def evict(self, num_tokens: int, **per_pool: int) -> int:
        freed = 0
        while freed < num_tokens and self.engine.unused:
            _, page = self.engine.unused.popitem(last=False)
            del self.engine.index[page.key]  # type: ignore[arg-type]
            page.key = None
            self.engine.free.append(page.pid)
            freed += PAGE
        return freed

    def inc_lock_ref(self, node: Any) -> None:
        for page in getattr(node, "pages", node or ()):
            self.engine._hold(page)

    def dec_lock_ref(self, node: Any) -> None:
        for page in getattr(node, "pages", node or ()):
            self.engine._drop(page)

    def check_hicache_events(self) -> None:
        """No host tier."""

    def full_evictable_size(self) -> int:
        return len(self.engine.unused) * PAGE

    def full_protected_size(self) -> int:
        return sum(PAGE for p in self.engine.pages if p.refs > 0)

    def pool_accounting(self) -> dict[str, PoolAccount]:
        free = len(self.engine.free) * PAGE
        return {"full": PoolAccount(self.size, free, self.full_evictable_size(),
                                    self.full_protected_size())}

    def stats(self) -> dict[str, float]:
        return {"cached_pages": len(self.engine.index), "free_pages": len(self.engine.free),
                "running_seqs": len(self.seqs)}

    def close(self) -> None:
        """Nothing to release."""


def make(kv_size: int = 8192, inject: Seq[str] = ()) -> HarnessAdapter:
    """Factory for ``--target examples.paged_engine:make``: it names the options it
    uses (the harness passes only those) and has no regressions to inject."""
    if inject:
        raise ValueError(f"PagedEngine has no regressions to inject (got {list(inject)})")
    return HarnessAdapter(PagedEngine(max(1, kv_size // PAGE)))
