"""The memory signals a run records besides RSS and its gauges, with their units.

Kept apart from :mod:`harness.runfiles.rundata` (which needs numpy) so the worker
can name them: it refuses a budget on a metric no run would record.
"""

from __future__ import annotations

# name -> unit ("B" bytes, "" a count), as the heap sampler's lines carry them:
# memory, and the process resources a leak can hold (threads, file descriptors).
MEMORY_SIGNALS = {
    "heap": "B", "py_blocks": "", "shmem": "B", "cuda_allocated": "B", "cuda_reserved": "B",
    "threads": "", "fds": "", "tensor_pinned": "B",
}
# Series every run can judge besides its gauges.
JUDGED_SIGNALS = ("rss", "uss", "cyclic_garbage", *MEMORY_SIGNALS)
