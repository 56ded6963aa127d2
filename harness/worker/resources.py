"""What the process's threads run and what its file descriptors point at, once at stop.

The ``threads`` and ``fds`` counts (the heap sampler's) say
that a thread or a descriptor is kept per unit of work; this census says
which: live threads grouped by the function they run (``Spill._flush
(cache.py:40)``), descriptors by what they point at (``socket``, ``pipe``,
``file in /tmp``). Written as one ``event`` named ``resources``::

    {"type": "event", "name": "resources", "t": 20.1,
     "threads": [{"what": "Spill._flush (bench/zoo/resource_leaks.py:41)", "count": 14}],
     "fds": [{"what": "file in /tmp", "count": 31}, {"what": "socket", "count": 2}]}

Cheap (a walk of ``threading.enumerate()`` and one ``readlink`` per
descriptor) and taken after the loop, so it enters no judged rate.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

from harness.runfiles.records import ResourceGroup
from harness.worker.frames import short

FD_DIR = "/proc/self/fd"
TOP = 5  # groups kept per census


def thread_origin(thread: threading.Thread) -> str:
    """The function a thread runs, with its source line; its class for C-level targets."""
    target: Any = getattr(thread, "_target", None)
    if target is None and type(thread).run is not threading.Thread.run:
        target = type(thread).run  # a Thread subclass with its own run()
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    if code is None:
        return f"{type(thread).__qualname__} {thread.name.rstrip('0123456789-')}".strip()
    name = getattr(target, "__qualname__", code.co_name)
    return f"{name} ({short(code.co_filename)}:{code.co_firstlineno})"


def fd_kind(link: str) -> str:
    """``socket``, ``pipe``, ``anon_inode:[eventfd]``, or ``file in <its folder>``."""
    for kind in ("socket", "pipe"):
        if link.startswith(f"{kind}:"):
            return kind
    if link.startswith("anon_inode:") or not link.startswith("/"):
        return link
    return f"file in {os.path.dirname(link) or '/'}"


def thread_census() -> list[ResourceGroup]:
    """Live threads other than the main one, grouped by what they run, most first."""
    main = threading.main_thread()
    counts = Counter(thread_origin(t) for t in threading.enumerate() if t is not main)
    return [{"what": what, "count": n} for what, n in counts.most_common(TOP)]


def fd_census(path: str = FD_DIR) -> list[ResourceGroup]:
    """Open descriptors grouped by what they point at, most first (empty without /proc)."""
    counts: Counter[str] = Counter()
    try:
        names = os.listdir(path)
    except OSError:
        return []
    for name in names:
        try:
            counts[fd_kind(os.readlink(os.path.join(path, name)))] += 1
        except OSError:
            continue  # closed meanwhile, or the listing's own descriptor
    return [{"what": what, "count": n} for what, n in counts.most_common(TOP)]
