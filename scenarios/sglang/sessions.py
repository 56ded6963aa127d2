"""Streaming sessions (the ``*-sessions`` scenarios) on the SGLang target: which releases
run them, decided from the release's files before any worker starts (nothing of SGLang
or torch is imported here). The adapter is ``scenarios/sglang/sessioncache.py``.

0.5.23 keeps a streaming session's record inside the cache (``session_records``) and
hands each turn's row to it through ``maybe_hand_to_session``/``claim_kv_row``.
Releases before it lack those calls: 0.5.17's ``StreamingSession`` (and 0.5.11's)
wraps the cache's ``cache_finished_req``, a lifecycle the legacy adapter drives
without sessions, so they decline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scenarios.sglang import compat, glue

SESSION_FUNCTIONS = ("session_records", "claim_kv_row", "maybe_hand_to_session")
LACKS = ("streaming sessions are driven where the cache owns them (0.5.23's "
         "UnifiedRadixCache: session_records, claim_kv_row, maybe_hand_to_session), and "
         "this release's base cache defines none of them (its StreamingSession wraps "
         "cache_finished_req, a lifecycle this target drives without sessions)")
WITH_SWA = "streaming sessions are driven on the FULL+MAMBA unified cache only"


def declines(options: Mapping[str, Any]) -> str | None:
    """Why the session scenarios do not run on the located release (None: they do),
    from what its base cache's file defines."""
    try:
        site = glue.locate()
    except glue.GlueError:
        return None  # the factory says why the release cannot be loaded
    base = compat.source_defines(site, "sglang/srt/mem_cache/base_prefix_cache.py")
    if base is not None and not set(SESSION_FUNCTIONS) <= base:
        return LACKS
    if options.get("swa_size") is not None:
        return WITH_SWA
    return None
