"""Exact byte and count signals: C heap in use, Python blocks, CUDA allocator bytes.

RSS moves in pages and arenas and keeps climbing for minutes on a healthy
cache; these signals move by the byte and are flat on a healthy cache, so
they confirm small rates in short runs:

- ``heap``: glibc ``mallinfo2()``, ``uordblks + hblkhd``: bytes handed out by
  malloc, arena chunks plus mmapped ones (CPU tensors' data, native buffers),
  read through :mod:`harness.worker.glibc`. Blind to what bypasses malloc:
  CPython's small-object arenas, ``mmap``, shared memory. Other libcs: unavailable.
- ``py_blocks``: ``sys.getallocatedblocks()``, the pymalloc blocks in use
  (Python objects, counted, not sized), which ``heap`` does not see.
- ``shmem``: resident shared memory (``RssShmem`` in /proc/self/status):
  ``mmap.mmap(-1, n)``, ``multiprocessing.shared_memory``, tensors moved to
  shared memory, files in /dev/shm mapped. Neither malloc nor pymalloc sees
  these pages; they move by whole pages and stay flat on a healthy cache, so
  they need no calibration. Other OSes: unavailable.
- ``threads`` and ``fds``: the kernel's thread count (from the same read) and
  open file descriptors: a thread started per request and never joined, a
  file or socket never closed. Flat on a healthy cache; at ``stop`` a census
  says what the live threads run and what the descriptors point at
  (:mod:`harness.worker.resources`).
- ``cuda_allocated`` / ``cuda_reserved``: torch's CUDA caching allocator,
  only when torch is already imported by the workload and sees a device
  (importing torch here would cost the worker seconds and hundreds of MB).

No single one sees everything, so RSS stays a judged signal beside them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from harness.runfiles.records import HeapLine
from harness.worker.glibc import load_heap_reader
from harness.worker.resources import FD_DIR, fd_census, thread_census
from harness.worker.samplers.base import PeriodicSampler

STATUS_FILE = "/proc/self/status"
SHMEM_FIELD, THREADS_FIELD = b"RssShmem:", b"Threads:"


def read_status(path: str = STATUS_FILE) -> dict[str, int] | None:
    """``shmem`` (bytes) and ``threads`` from one read of /proc/self/status; None without it."""
    found: dict[str, int] = {}
    try:
        with open(path, "rb") as status:
            for line in status:
                if line.startswith(SHMEM_FIELD):
                    found["shmem"] = int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
                elif line.startswith(THREADS_FIELD):
                    found["threads"] = int(line.split()[1])
    except OSError:
        return None
    return found if len(found) == 2 else None


def count_fds(path: str = FD_DIR) -> int | None:
    """Open file descriptors of this process (the listing's own one left out), or None."""
    try:
        return len(os.listdir(path)) - 1
    except OSError:
        return None


def status_unavailable() -> str | None:
    """Why shared memory and threads cannot be read here, or None when they can."""
    if read_status() is None:
        return f"needs Linux's {STATUS_FILE} with RssShmem and Threads lines"
    return None


def fds_unavailable() -> str | None:
    if count_fds() is None:
        return f"needs Linux's {FD_DIR}"
    return None


def cuda_unavailable() -> str | None:
    """Why the CUDA allocator cannot be read in this worker, or None when it can."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return "the workload does not use torch"
    try:
        if not torch.cuda.is_available():
            return "torch sees no CUDA device"
    except Exception as exc:  # a broken CUDA install must not end the run
        return f"torch.cuda could not be queried: {exc}"
    return None


class HeapSampler(PeriodicSampler):
    name = "heap"

    def __init__(self, interval_s: float = 0.1) -> None:
        super().__init__(interval_s)
        self._heap, self._why_no_heap = load_heap_reader()
        self._cuda: Any = None
        self._status = False
        self._fds = False

    def unavailable(self) -> str | None:
        return None  # Python's block count is always there; the parts say what is missing

    def on_start(self, now: float) -> None:
        no_cuda, no_status, no_fds = cuda_unavailable(), status_unavailable(), fds_unavailable()
        self._status, self._fds = no_status is None, no_fds is None
        unavailable = (("heap", self._why_no_heap), ("cuda", no_cuda), ("shmem", no_status),
                       ("threads", no_status), ("fds", no_fds))
        for signal, why in unavailable:
            if why is not None:
                self.sink.event("signal_unavailable", now, signal=signal, reason=why)
        if no_cuda is None:
            self._cuda = sys.modules["torch"].cuda
        self.take(now)
        super().on_start(now)

    def take(self, now: float, final: bool = False) -> None:
        line: HeapLine = {
            "type": "heap", "t": now, "ops": self.ops, "py_blocks": sys.getallocatedblocks(),
        }
        if self._heap is not None:
            line["heap"] = self._heap()
        status = read_status() if self._status else None
        if status is not None:
            line["shmem"], line["threads"] = status["shmem"], status["threads"]
        fds = count_fds() if self._fds else None
        if fds is not None:
            line["fds"] = fds
        if self._cuda is not None:
            line["cuda_allocated"] = int(self._cuda.memory_allocated())
            line["cuda_reserved"] = int(self._cuda.memory_reserved())
        self.sink.line(line)
        if final:
            self.sink.event("resources", now, threads=thread_census(), fds=fd_census())
