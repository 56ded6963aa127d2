"""Counting tree nodes that are alive but no longer in the tree, through ``gc``."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def gc_disabled() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def detached_alive(cache: Any) -> int:
    """Instances of the cache's node class that ``gc`` sees but the tree does not hold."""
    in_tree = {id(n) for n in cache.iter_nodes()}
    node_cls = type(cache.root_node)
    return sum(1 for o in gc.get_objects() if type(o) is node_cls and id(o) not in in_tree)


def churn_without_gc(
    make_cache: Callable[[], Any], run: Callable[[Any], object]
) -> tuple[int, int, int]:
    """Run churn with GC off; return (detached before collect, objects collected, after)."""
    with gc_disabled():
        cache = make_cache()
        run(cache)
        before = detached_alive(cache)
        assert cache.detached_alive_nodes() == before
        collected = gc.collect()
        return before, collected, detached_alive(cache)
