"""Leaks of process resources rather than bytes: threads never joined, files never closed.

Both hold almost no memory (a parked thread's stack is mostly untouched
virtual memory; an open file is a kernel object), so no byte signal sees
them; the process runs out of threads or descriptors instead, hours later.
The ledger counts the threads or descriptors held (rate per hour, quantum 1).
"""

from __future__ import annotations

import tempfile
import threading
from typing import IO, Any

from bench.zoo.base import ZooCache
from refcache.req import Req


class ThreadLeak(ZooCache):
    """``cache_finished_req`` hands each flush to a new thread that waits for a signal never sent.

    A write-back helper started per request whose "done" event is only set
    at shutdown: every thread parks forever and is never joined.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shutdown = threading.Event()
        self.flushers: list[threading.Thread] = []

    def cache_finished_req(self, req: Req, is_insert: bool = True) -> None:
        super().cache_finished_req(req, is_insert)
        if self.ledger.owed():
            flusher = threading.Thread(target=self._flush, name="flush", daemon=True)
            flusher.start()
            self.flushers.append(flusher)
            self.ledger.add(1)

    def _flush(self) -> None:
        self.shutdown.wait()  # the acknowledgement it waits for never comes

    def close(self) -> None:
        self.shutdown.set()
        for flusher in self.flushers:
            flusher.join()
        self.flushers.clear()
        super().close()


class FileLeak(ZooCache):
    """``evict`` spills the evicted token count to a temporary file it never closes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spills: list[IO[bytes]] = []

    def evict(self, num_tokens: int, **per_pool: int) -> int:
        evicted = super().evict(num_tokens, **per_pool)
        if self.ledger.owed():
            spill = tempfile.TemporaryFile(prefix="spill-")  # noqa: SIM115 (the leak: never closed)
            spill.write(evicted.to_bytes(8, "little"))
            self.spills.append(spill)  # kept "for the load-back", never closed
            self.ledger.add(1)
        return evicted

    def close(self) -> None:
        for spill in self.spills:
            spill.close()
        self.spills.clear()
        super().close()
