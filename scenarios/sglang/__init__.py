"""SGLang's own prefix caches as a ``--target``: ``--target scenarios.sglang:make``.

Usage (a release beside the harness, the virtualenv's torch untouched)::

    .venv/bin/python -m scenarios.sglang.install 0.5.23      # .sglang/0.5.23/site, ~35 s
    export LEAK_HARNESS_SGLANG=0.5.23                         # or a folder; one installed: found
    .venv/bin/python -m scenarios.sglang                      # which class each scenario runs on
    .venv/bin/leak-harness run mamba-lru --target scenarios.sglang:make --duration 20s

In an SGLang environment (``sglang`` importable) the installed release is used as is.
Releases: any from 0.5.11 on (verified: ``glue.TESTED``). The adapter is picked by what
the release has, not its number (``compat.py``): the handle-based lifecycle
(``handles.py``, 0.5.22 on) or ``cache_unfinished_req`` with
``release_kv_cache(is_insert=)`` (``legacy.py``, 0.5.11 to 0.5.21);
``LEAK_HARNESS_SGLANG_TREE_CORE=rust`` runs the unified cache on its Rust tree core.

The factory builds the installed SGLang release's cache class for the scenario's
family, on SGLang's own pools and allocators over CPU tensors, and drives it
through SGLang's own request lifecycle (``scenarios/sglang/handles.py`` for 0.5.23's
handle-based API). Where the release comes from: ``scenarios/sglang/glue.py``
(``LEAK_HARNESS_SGLANG``, or ``python -m scenarios.sglang.install VERSION``).

The family comes from ``family=`` when the harness passes it, else from the options
the scenario offers (the reference factories' options differ per family):

| options offered | family | 0.5.23 class |
|---|---|---|
| ``pp_world_size`` > 1 | ``pp-sync`` | not mapped (a gloo pipeline of the reference's) |
| ``streaming_sessions`` | ``sessions`` | ``UnifiedRadixCache`` (FULL+MAMBA), sessions |
| ``metadata_size`` | ``pd`` | not mapped (PD's rows are SGLang's scheduler's) |
| ``host_size`` | ``hiradix`` / ``himamba`` | ``UnifiedRadixCache`` (FULL / +MAMBA), HiCache |
| ``mamba_size`` and ``swa_size`` | ``unified`` | ``UnifiedRadixCache`` (FULL+MAMBA+SWA) |
| ``mamba_size`` | ``mamba`` | ``UnifiedRadixCache`` (FULL+MAMBA) |
| ``swa_size`` | ``swa`` | ``UnifiedRadixCache`` (FULL+SWA) |
| none of them | ``radix`` | ``RadixCache`` |
| ``page_size`` > 1, no other | ``radix`` | ``RadixCache``, ``PagedTokenToKVPoolAllocator`` |

Paged KV runs where the release's paged allocator has a CPU branch (0.5.23's torch
``alloc_extend_naive``); 0.5.11 and 0.5.17 launch Triton kernels for it and decline
(``scenarios/sglang/paged.py``). The adapters name SGLang's own allocators and the ids its
tree holds to the slot ledger (``pool_allocators``/``held_slots``), except on the Rust
core and on paged KV (their notes say why).

The host tier (``host.py``): 0.5.11 and 0.5.17 run ``HiRadixCache`` and
``HiMambaRadixCache``, 0.5.23 ``UnifiedRadixCache`` with its HiCache host tier, with
SGLang's file storage backend when the scenario has a storage tier; a host pool no larger
than the device pool (himamba-stale-leaf) is declined: SGLang's host pools refuse it.

Scenarios asking for EAGLE's bigram keys (``eagle``: swa-spec, unified-spec) are
declined: their verify step is a speculative worker's, over a draft and a target model.

Streaming sessions (``sessions.py``, ``sessioncache.py``): 0.5.23's
``UnifiedRadixCache`` keeps them, SGLang's ``SessionController`` opens and closes them
and builds each turn's ``Req``; releases whose cache does not own its sessions decline.

``family="unified-full"`` builds ``UnifiedRadixCache`` with the full component alone;
``tree_core="python"`` (default here: its nodes can be counted) or ``"rust"`` picks
0.5.23's tree core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scenarios.sglang import compat, glue, host

FAMILIES = ("radix", "unified-full", "mamba", "swa", "unified", "sessions")
UNMAPPED = {
    "pp-sync": "the PP-sync scenarios start the reference cache's own gloo pipeline; "
               "SGLang's PP groups need a multi-process launch",
    "pd": "the PD scenarios' metadata rows, request rows and bootstrap/transfer queues are "
          "SGLang's disaggregation scheduler's (disaggregation/prefill.py, decode.py, with a "
          "transfer backend), not its tree cache's, which is all this target builds",
}
# A scenario whose cache options ask for EAGLE's bigram keys (swa-spec, unified-spec).
EAGLE = ("the speculative scenarios need EAGLE's verify step, which SGLang runs in its "
         "speculative worker on a draft model's and the target model's forward passes "
         "(accepting drafts and freeing the rejected ones' out_cache_loc), and this target "
         "drives SGLang's caches without a model")


def family_of(options: Mapping[str, Any]) -> str:
    """The cache family a scenario's options describe (see the module's table)."""
    family = options.get("family")
    if family:
        return str(family)
    if int(options.get("pp_world_size", 1) or 1) > 1:
        return "pp-sync"
    if options.get("streaming_sessions"):
        return "sessions"
    if options.get("metadata_size") is not None:
        return "pd"
    if options.get("host_size") is not None:
        return "himamba" if options.get("mamba_size") is not None else "hiradix"
    has_mamba = options.get("mamba_size") is not None
    has_swa = options.get("swa_size") is not None
    if has_mamba and has_swa:
        return "unified"
    if has_mamba:
        return "mamba"
    if has_swa:
        return "swa"
    return "radix"


def make(inject: Sequence[str] = (), kv_size: int = 8192, **options: Any) -> Any:
    """Factory for ``--target scenarios.sglang:make``: SGLang's cache for the scenario."""
    if inject:
        raise ValueError(f"the SGLang target runs SGLang's code as released; it has no "
                         f"regressions to switch on (got {list(inject)})")
    family = family_of(options)
    if options.get("eagle"):
        raise glue.GlueError(f"not mapped on SGLang: {EAGLE}")
    if family in UNMAPPED:
        raise glue.GlueError(f"not mapped on SGLang: {UNMAPPED[family]}")
    if family == "sessions":  # scenarios/sglang/sessions.py
        from scenarios.sglang import sessions

        reason = sessions.declines(options)
        if reason:
            raise glue.GlueError(f"not mapped on SGLang: {reason}")
    if family in host.FAMILIES:  # the host tier: scenarios/sglang/host.py
        return host.build(family, {**options, "kv_size": kv_size})
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")
    release = glue.load()
    lifecycle = compat.release_lifecycle()  # what the release has, not its number
    if lifecycle == compat.HANDLES and family == "sessions":
        from scenarios.sglang import sessioncache

        cache = sessioncache.build({**options, "kv_size": kv_size})
    elif lifecycle == compat.HANDLES:
        from scenarios.sglang import handles

        cache = handles.build(family, {**options, "kv_size": kv_size})
    elif lifecycle == compat.LEGACY:
        from scenarios.sglang import legacy

        cache = legacy.build(family, {**options, "kv_size": kv_size})
    else:
        raise glue.GlueError(f"SGLang {release.version} has neither the handle-based "
                             f"lifecycle (match_kv_cache, lock) nor cache_unfinished_req with "
                             f"release_kv_cache(is_insert=)")
    if release.untested:
        cache.add_note(release.untested)
    return cache


def declines(options: Mapping[str, Any]) -> str | None:
    """Why this target does not run a scenario with these cache options (None: it does).

    ``leak-harness check --target sglang`` makes such cells n/a before any worker starts."""
    family = family_of(options)
    if options.get("eagle"):
        return EAGLE
    if family in UNMAPPED:
        return UNMAPPED[family]
    if family in host.FAMILIES:
        return host.declines(family, options)
    if family == "sessions":
        from scenarios.sglang import sessions

        return sessions.declines(options)
    if int(options.get("page_size", 1) or 1) != 1:
        from scenarios.sglang import paged

        return paged.declines(family)
    return None


def describe() -> str:
    """One line for a doctor: the release the target runs and where it comes from."""
    try:
        release = glue.load()
    except glue.GlueError as exc:
        return str(exc)
    where = release.site or "the environment's sglang"
    return f"SGLang {release.version} from {where}" + (f"; {release.untested}"
                                                        if release.untested else "")


make.regressions = ()  # type: ignore[attr-defined]
make.describe = describe  # type: ignore[attr-defined]
make.declines = declines  # type: ignore[attr-defined]
