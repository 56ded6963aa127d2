"""The host-tier families (``hiradix``, ``himamba``) on each SGLang release.

| family | 0.5.11 / 0.5.17 (``hostlegacy.py``) | 0.5.23 (``hosttier.py``) |
|---|---|---|
| ``hiradix`` | ``HiRadixCache`` | ``UnifiedRadixCache`` (FULL), HiCache |
| ``himamba`` | ``HiMambaRadixCache`` | ``UnifiedRadixCache`` (FULL+MAMBA), HiCache |

The adapter follows what the release has, not its number: the handle-based lifecycle
(``compat.release_lifecycle``) runs the unified cache's host tier (``hosttier.py``); the
``cache_finished_req`` one with ``hiradix_cache.py``, its host-tier classes
(``hostlegacy.py``). What the host tier needs on
a CPU (and nothing more) is in ``hostglue.py``; its books in ``hostbooks.py``.
:func:`declines` reads only the scenario's options, so a parent process asks it before
any worker imports SGLang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scenarios.sglang import compat, glue

FAMILIES = ("hiradix", "himamba")
# SGLang's host pool must be larger than the device pool (HostKVCache asserts "The host
# memory should be larger than the device memory with the current protocol").
SMALLER_HOST = ("a host tier no larger than the device pool (host_size {host} <= kv_size "
                "{kv}), which SGLang refuses: its host pools assert that host memory is "
                "larger than device memory")


def declines(family: str, options: Mapping[str, Any]) -> str | None:
    """Why a host-tier scenario does not run on SGLang (None: it does)."""
    kv = int(options.get("kv_size", 8192))
    host = int(options.get("host_size", 2 * kv))
    if host <= kv:
        return SMALLER_HOST.format(host=host, kv=kv)
    if int(options.get("page_size", 1) or 1) != 1:
        return "the host tier is driven at page_size 1 only"
    return None


def build(family: str, options: Mapping[str, Any]) -> Any:
    """The release's own host-tier cache for ``family``, behind the harness's protocol."""
    reason = declines(family, options)
    if reason is not None:
        raise glue.GlueError(f"not mapped on SGLang: {reason}")
    release = glue.load()
    cache: Any
    lifecycle = compat.release_lifecycle()
    if lifecycle == compat.HANDLES:  # 0.5.23: the unified cache's host tier
        from scenarios.sglang import hosttier

        cache = hosttier.build(family, options)
    elif lifecycle == compat.LEGACY and _has_module("sglang.srt.mem_cache.hiradix_cache"):
        from scenarios.sglang import hostlegacy

        cache = hostlegacy.build(family, options)
    else:
        raise glue.GlueError(f"SGLang {release.version}: the host tier is driven on "
                             f"HiRadixCache with the cache_finished_req lifecycle or on "
                             f"UnifiedRadixCache's HiCache with the handle-based one; this "
                             f"release has neither pair")
    if release.untested:
        cache.add_note(release.untested)
    return cache


def _has_module(name: str) -> bool:
    """Whether the release has a module (what it has decides, not its version number)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
