"""GC modes for the worker: how the collector behaves around the workload.

- ``default``: the interpreter as it starts.
- ``server``: a large long-lived heap, like a serving scheduler with its model,
  tokenizer and request state loaded. CPython (3.8 to 3.13) runs a full
  collection only when the objects that survived into gen 2 since the last one
  exceed a quarter of the long-lived total, so a big heap makes gen-2 rare and
  cyclic garbage piles up in RSS the way it did in production. ``gc.freeze()``
  would not do: frozen objects leave the long-lived count, and gen-2 would stay
  as frequent as in a small heap.
- ``off``: ``gc.disable()``; only the harness's own windows collect.
"""

from __future__ import annotations

import gc
import time
from typing import Any

# Every ballast entry is two GC-tracked objects: a tuple that holds a list.
# Tracked matters: tuples of atoms and dicts of atoms are untracked by CPython
# and would not count towards the long-lived total at all.
OBJECTS_PER_ENTRY = 2


def apply_gc_mode(mode: str, ballast_objects: int) -> tuple[dict[str, Any], list[Any]]:
    """Set the mode up; return its description for the header and the ballast.

    The caller keeps the ballast alive for the whole run.
    """
    info: dict[str, Any] = {"mode": mode, "enabled_at_start": gc.isenabled()}
    ballast: list[Any] = []
    if mode == "server":
        began = time.perf_counter()
        ballast = [(i, []) for i in range(ballast_objects // OBJECTS_PER_ENTRY)]
        gc.collect()  # a full collection moves every survivor into gen 2
        info["ballast_objects"] = len(ballast) * OBJECTS_PER_ENTRY
        info["ballast_s"] = round(time.perf_counter() - began, 3)
    elif mode == "off":
        gc.disable()
    elif mode != "default":
        raise ValueError(f"unknown GC mode {mode!r}")
    info["enabled"] = gc.isenabled()
    info["thresholds"] = list(gc.get_threshold())
    return info, ballast
