"""Paged KV (``page_size`` > 1, the radix-dllm scenario) on the SGLang target: which
releases have a CPU path for it, decided from the release's files before any worker
starts (nothing of SGLang is imported here).

0.5.23's ``PagedTokenToKVPoolAllocator`` allocates through its own torch functions
(``alloc_extend_naive``, ``alloc_decode_naive``) when the platform cannot launch
Triton; the adapter builds it (``handles.paged_allocator``), as on 0.5.22. 0.5.11 to
0.5.21 have no such branch (read in their ``mem_cache/allocator.py`` and
``allocator/paged.py``); ``compat.paged_cpu_branch`` reads the allocator's file for it.
"""

from __future__ import annotations

from scenarios.sglang import compat, glue

NO_CPU_PATH = (
    "paged KV (page_size > 1): this release's PagedTokenToKVPoolAllocator.alloc_extend and "
    "alloc_decode launch the Triton kernels alloc_extend_kernel and alloc_decode_kernel "
    "with no CPU branch (its torch alloc_extend_naive is called only by the NPU "
    "allocator), and no Triton runs here; 0.5.22's and later allocators have the torch branch")
LEGACY_ONLY = ("paged KV (page_size > 1) is driven through the handle-based lifecycle "
               "(handles.py) only, and this release drives requests through "
               "cache_unfinished_req and release_kv_cache(is_insert=)")


def declines(family: str) -> str | None:
    """Why paged KV of ``family`` does not run on the located release (None: it does),
    from what its files define (``scenarios/sglang/compat.py``), not its number."""
    if family != "radix":
        return "paged KV (page_size > 1) is driven on RadixCache only"
    try:
        site = glue.locate()
    except glue.GlueError:
        return None  # the factory says why the release cannot be loaded
    if compat.paged_cpu_branch(site) is False:
        return NO_CPU_PATH
    if compat.source_lifecycle(site) == compat.LEGACY:
        return LEGACY_ONLY
    return None
