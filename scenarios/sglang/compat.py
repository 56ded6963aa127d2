"""What the installed SGLang release offers, probed from its own modules, not its number.

The target runs on every release from 0.5.11 on, and releases between the ones it was
built on mix their neighbours' APIs (0.5.14 keeps its ``Req`` fields on the request
but its tokens in arrays; 0.5.20 keeps ``cache_finished_req`` but moved the request's
KV fields into ``req.kv``). So each difference the adapters meet is one probe here,
named by what it looks for; ``make``, ``handles.py`` and ``legacy.py`` ask the probe,
never the version. Two kinds:

- live probes take SGLang's imported modules or classes (in the worker, after
  :func:`scenarios.sglang.glue.load`);
- source probes (:func:`source_defines`) read a release's files without importing
  them, for the parent process, which decides n/a cells before any worker starts
  and must not install the glue's stand-ins in itself.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

NO_MODEL = "leak-harness-no-model"  # ServerArgs.model_path: no model is loaded
HANDLES = "handles"  # finish(handle, outcome) + common.match_kv_cache/checkpoint_kv_cache
LEGACY = "legacy"  # the cache's cache_unfinished_req + common.release_kv_cache(is_insert=)
# The functions of mem_cache/common.py that drive the handle-based lifecycle.
HANDLE_FUNCTIONS = ("match_kv_cache", "checkpoint_kv_cache", "release_kv_cache")


# ------------------------------------------------------------------ the lifecycle
def lifecycle(common: Any, base_cache: type) -> str | None:
    """Which request lifecycle the release's scheduler drives, from its functions.

    ``HANDLES`` (0.5.22 on): ``common`` has the handle functions and the tree locks by
    ``lock``/``unlock``. ``LEGACY`` (0.5.11-0.5.21): the cache has
    ``cache_unfinished_req`` and ``common.release_kv_cache`` takes ``is_insert``; it
    ends in the cache's ``cache_finished_req`` (to 0.5.20) or ``insert_req`` + ``unpin``
    (0.5.21), which the adapter never calls itself. 0.5.20's ``finish(handle, outcome)``
    beside them does not make a release handle-driven."""
    if (all(callable(getattr(common, name, None)) for name in HANDLE_FUNCTIONS)
            and has_tree_lock(base_cache)):
        return HANDLES
    release = getattr(common, "release_kv_cache", None)
    if (callable(getattr(base_cache, "cache_unfinished_req", None)) and callable(release)
            and takes(release, "is_insert")):
        return LEGACY
    return None


def has_tree_lock(cache: Any) -> bool:
    """Whether admission locks through ``lock(node) -> TreeLock``/``unlock(lock)``
    (0.5.22 on) rather than ``inc_lock_ref``/``dec_lock_ref`` alone."""
    return callable(getattr(cache, "lock", None)) and callable(getattr(cache, "unlock", None))


def source_lifecycle(site: Path | None) -> str | None:
    """:func:`lifecycle` from the release's files (nothing imported): the handle
    functions in ``mem_cache/common.py`` and ``lock`` in the base cache, else
    ``cache_unfinished_req`` there."""
    common = source_defines(site, "sglang/srt/mem_cache/common.py")
    base = source_defines(site, "sglang/srt/mem_cache/base_prefix_cache.py")
    if common is None or base is None:
        return None
    if set(HANDLE_FUNCTIONS) <= common and {"lock", "unlock"} <= base:
        return HANDLES
    if "release_kv_cache" in common and "cache_unfinished_req" in base:
        return LEGACY
    return None


def paged_cpu_branch(site: Path | None) -> bool | None:
    """Whether the release's ``PagedTokenToKVPoolAllocator`` has a torch branch for a
    machine without Triton: it records ``self.use_triton_kernels`` and falls back to
    ``alloc_extend_naive`` (0.5.23); before, it launches its Triton kernels always.
    None when the allocator's file cannot be read."""
    for rel in ("sglang/srt/mem_cache/allocator/paged.py", "sglang/srt/mem_cache/allocator.py"):
        names = source_defines(site, rel)
        if names is not None:
            return "use_triton_kernels" in names
    return None


def source_defines(site: Path | None, rel: str) -> set[str] | None:
    """The names a release's source file defines: functions and classes at any depth,
    and ``self.<name>`` attributes its methods assign. ``site``: the folder holding
    ``sglang`` (None: the importable sglang). None when the file is absent."""
    path = _release_file(site, rel)
    if path is None:
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id == "self"):
            names.add(node.attr)
    return names


def _release_file(site: Path | None, rel: str) -> Path | None:
    if site is None:
        try:
            spec = importlib.util.find_spec("sglang")  # finds the package, runs nothing
        except (ImportError, ValueError):
            return None
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            return None
        site = Path(locations[0]).parent
    path = site / rel
    return path if path.is_file() else None


def release_lifecycle() -> str | None:
    """:func:`lifecycle` of the release the glue loads (imports its two modules)."""
    common, base = (_import(name) for name in (
        "sglang.srt.mem_cache.common", "sglang.srt.mem_cache.base_prefix_cache"))
    return lifecycle(common, base.BasePrefixCache)


# ------------------------------------------------------------------ server args
def server_args_publisher(server_args: Any, context: Any | None) -> Callable[[Any], None]:
    """How the release makes ``ServerArgs`` visible to the cache code at call time:
    ``context.get_context().set_server_args`` where the runtime context (``context``:
    the release's ``runtime_context`` module, None if it has none) has that method
    (0.5.15 on: the cache reads ``get_serving()``/``get_spec()``); otherwise the
    scheduler's module-level ``set_global_server_args_for_scheduler`` (0.5.11-0.5.14:
    0.5.14 has a runtime context, but it carries no server args yet)."""
    if context is not None:
        setter = getattr(context.get_context(), "set_server_args", None)
        if callable(setter):
            return setter  # type: ignore[no-any-return]
    setter = getattr(server_args, "set_global_server_args_for_scheduler", None)
    if not callable(setter):
        raise LookupError("this release has neither RuntimeContext.set_server_args nor "
                          "set_global_server_args_for_scheduler to publish server args by")
    return setter  # type: ignore[no-any-return]


def runtime_context() -> Any | None:
    """The release's ``sglang.srt.runtime_context`` module (0.5.14 on), or None."""
    try:
        spec = importlib.util.find_spec("sglang.srt.runtime_context")
    except (ImportError, ValueError):
        return None
    return _import("sglang.srt.runtime_context") if spec is not None else None


def _import(name: str) -> Any:
    from scenarios.sglang import glue

    return glue.import_modules([name])[0]


def default_server_args(cls: type, defaults_only: Callable[[type], Any]) -> Any:
    """A ``ServerArgs`` of defaults without the launch-time resolution. A dataclass
    (0.5.11-0.5.19) resolves the model's config from a hub in ``__post_init__``, so
    ``defaults_only`` fills its fields without calling it; a ``msgspec.Struct``
    (0.5.20 on) resolves only in a separate ``resolve_once``, and refuses
    ``object.__new__``, so it is simply constructed."""
    if dataclasses.is_dataclass(cls):
        return defaults_only(cls)
    return cls(model_path=NO_MODEL)


# ------------------------------------------------------------------ constructors
def accepted(func: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` less those ``func``'s signature does not name, unless it takes
    ``**kwargs`` (``CacheInitParams`` takes ``tree_core_backend`` from 0.5.21 on)."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {name: value for name, value in kwargs.items() if name in params}


def takes(func: Callable[..., Any], name: str) -> bool:
    """Whether ``func``'s signature names the parameter ``name``."""
    return name in inspect.signature(func).parameters


# ------------------------------------------------------------------ the request
def tokens_in_arrays(req_cls: type, sampling: Any) -> bool:
    """Whether SGLang's ``Req`` keeps token ids in ``array('q')`` (0.5.14 on) rather than
    lists: a throwaway request's fresh ``output_ids`` says (the Req concatenates its
    input ids with them, so both must be of one kind)."""
    probe = req_cls("leak-harness-probe", "", [0], sampling)
    return not isinstance(probe.output_ids, list)


def fill_field(req: Any) -> str:
    """The name of the ids a request's next extend covers: ``full_untruncated_fill_ids``
    (0.5.14 on) or ``fill_ids``."""
    return "full_untruncated_fill_ids" if hasattr(req, "full_untruncated_fill_ids") \
        else "fill_ids"


def has_extend_range(req: Any) -> bool:
    """Whether the admission records the extend window with ``set_extend_range``
    (0.5.15 on), which ``cache_unfinished_req`` reads."""
    return callable(getattr(req, "set_extend_range", None))


def kv_holder(req: Any, field: str) -> Any:
    """The object that holds a request's KV field ``field``: ``req.kv`` (``ReqKvInfo``)
    when it has it (0.5.20 keeps ``req_pool_idx``, the lengths, ``mamba_pool_idx``
    there; 0.5.17 only ``kv_allocated_len``), else the request itself."""
    kv = getattr(req, "kv", None)
    return kv if kv is not None and hasattr(kv, field) else req


def kv_get(req: Any, field: str, *default: Any) -> Any:
    """``field`` of a request's KV record (``default``, if given, when neither has it)."""
    return getattr(kv_holder(req, field), field, *default)


def kv_set(req: Any, field: str, value: Any) -> None:
    setattr(kv_holder(req, field), field, value)


def mark_extend(req: Any, start: int, end: int, refresh: bool) -> None:
    """Record that the request's next extend covers its ids ``[start, end)``, in the
    field the release's cache reads them from (``get_fill_ids``): ``set_extend_range``
    (0.5.15 on); else ``fill_len`` over ``full_untruncated_fill_ids`` (0.5.14, set by
    ``PrefillAdder``); else the whole ``fill_ids`` list (0.5.11, 0.5.12). ``refresh``:
    first rebuild the ids from the input and output ids, as the decode path does."""
    if has_extend_range(req):
        req.set_extend_range(start, end)
        return
    if refresh:
        setattr(req, fill_field(req), req.origin_input_ids + req.output_ids)
    if hasattr(req, "fill_len"):
        req.fill_len = end


# ------------------------------------------------------------------ the tree
def keep_lock(req: Any, result: Any, swa: bool) -> None:
    """Keep what the admission's ``inc_lock_ref`` returned where the release's cache reads
    it back (``PrefillAdder._req_inc_lock_ref``): the whole receipt,
    ``result.to_dec_params()``, where the ``Req`` has a ``lock_receipt`` field (0.5.20
    on: every cache releases with it); else the SWA lock uuid, for SWA caches (0.5.12
    already has ``to_dec_params``, but its caches read ``req.swa_uuid_for_lock``)."""
    if hasattr(req, "lock_receipt"):
        req.lock_receipt = result.to_dec_params()
    elif swa:
        req.swa_uuid_for_lock = result.swa_uuid_for_lock


def unlock_params(req: Any, base: Any, swa: bool) -> Any | None:
    """The ``dec_lock_ref`` parameters that undo :func:`keep_lock` (None: none needed)."""
    if hasattr(req, "lock_receipt"):
        return req.lock_receipt
    if swa:
        return base.DecLockRefParams(swa_uuid_for_lock=req.swa_uuid_for_lock)
    return None


def own_class(module: Any | None, name: str) -> type | None:
    """A family's own cache class (``MambaRadixCache``, ``SWARadixCache``) where the
    release still has it; None where its module or class is gone (0.5.21 on: the
    families run on ``UnifiedRadixCache`` with components)."""
    return getattr(module, name, None) if module is not None else None


def release_req(batch_mod: Any, server_args_mod: Any) -> Callable[..., None]:
    """SGLang's retraction of one running request, ``release_req`` (release_kv_cache,
    evict_from_tree_cache of the room the remaining requests need, reset_for_retract),
    as the release has it: a module function from 0.5.17 on (0.5.17's takes the
    server args, 0.5.23's reads its runtime context), a ``ScheduleBatch`` method on
    0.5.11, which reads only the batch's pools and cache, so a bare batch holding them
    and the one request serves."""
    func = getattr(batch_mod, "release_req", None)
    if callable(func):
        wants_args = takes(func, "server_args")

        def call(req: Any, remaining: int, req_pool: Any, allocator: Any, cache: Any) -> None:
            extra = {"server_args": server_args_mod.get_global_server_args()} if wants_args else {}
            func(req=req, remaing_req_count=remaining, req_to_token_pool=req_pool,
                 token_to_kv_pool_allocator=allocator, tree_cache=cache,
                 hisparse_coordinator=None, **extra)
        return call

    def via_batch(req: Any, remaining: int, req_pool: Any, allocator: Any, cache: Any) -> None:
        batch = object.__new__(batch_mod.ScheduleBatch)
        batch.reqs, batch.hisparse_coordinator = [req], None
        batch.req_to_token_pool, batch.token_to_kv_pool_allocator = req_pool, allocator
        batch.tree_cache = cache
        batch.release_req(0, remaining, server_args_mod.get_global_server_args())
    return via_batch
