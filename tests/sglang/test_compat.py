"""The capability probes of ``scenarios/sglang/compat.py``.

Against the releases installed in ``.sglang/`` (read from their files, nothing
imported), and against small fakes shaped as the releases in between were found to
be (0.5.14's Req, 0.5.17's lazy ReqKvInfo, 0.5.20's msgspec ServerArgs and lock
receipts, 0.5.21's insert_req lifecycle without the Mamba/SWA classes), so these run
without those releases installed.
"""

from __future__ import annotations

import dataclasses
import types
from array import array
from pathlib import Path
from typing import Any

import pytest

from scenarios.sglang import compat, glue

# What each installed release was read to have (docs/sglang.md, "Releases verified").
INSTALLED = {"0.5.11": (compat.LEGACY, False), "0.5.17": (compat.LEGACY, False),
             "0.5.23": (compat.HANDLES, True)}


def _site(version: str) -> Path:
    site = glue.ROOT / version / "site"
    if not (site / "sglang").is_dir():
        pytest.skip(f"SGLang {version} is not installed (make test installs it)")
    return site


@pytest.mark.parametrize("version", sorted(INSTALLED))
def test_source_probes_on_the_installed_releases(version: str) -> None:
    lifecycle, paged = INSTALLED[version]
    site = _site(version)
    assert compat.source_lifecycle(site) == lifecycle
    assert compat.paged_cpu_branch(site) is paged


def test_source_probes_say_none_for_a_folder_without_the_files(tmp_path: Path) -> None:
    assert compat.source_lifecycle(tmp_path) is None
    assert compat.paged_cpu_branch(tmp_path) is None
    assert compat.source_defines(tmp_path, "sglang/srt/mem_cache/common.py") is None


def test_source_defines_reads_functions_classes_and_self_attributes(tmp_path: Path) -> None:
    path = tmp_path / "sglang/srt/mem_cache/allocator/paged.py"
    path.parent.mkdir(parents=True)
    path.write_text("class PagedTokenToKVPoolAllocator:\n"
                    "    def __init__(self):\n        self.use_triton_kernels = False\n"
                    "def alloc_extend_naive():\n    pass\n")
    names = compat.source_defines(tmp_path, "sglang/srt/mem_cache/allocator/paged.py")
    assert names == {"PagedTokenToKVPoolAllocator", "__init__", "use_triton_kernels",
                     "alloc_extend_naive"}
    assert compat.paged_cpu_branch(tmp_path) is True


# ------------------------------------------------------------------ the lifecycle
def _release_kv_cache_is_insert(req: Any, tree_cache: Any, is_insert: bool = True) -> None:
    return None


def _release_kv_cache_checkpoint(req: Any, tree_cache: Any, checkpoint: bool = True) -> None:
    return None


class _CacheFinishedBase:  # 0.5.11-0.5.20
    def cache_finished_req(self, req: Any, is_insert: bool = True) -> None:
        return None

    def cache_unfinished_req(self, req: Any) -> None:
        return None


class _FinishBesideBase(_CacheFinishedBase):  # 0.5.20: finish(handle, outcome) too
    def finish(self, handle: Any, outcome: Any) -> None:
        return None


class _InsertReqBase:  # 0.5.21: insert_req + unpin, no cache_finished_req
    def insert_req(self, req: Any, *, up_to: int) -> None:
        return None

    def cache_unfinished_req(self, req: Any) -> None:
        return None


class _HandleBase:  # 0.5.22 on
    def finish(self, handle: Any, outcome: Any) -> None:
        return None

    def lock(self, node: Any) -> Any:
        return node

    def unlock(self, lock: Any) -> None:
        return None


LEGACY_COMMON = types.SimpleNamespace(release_kv_cache=_release_kv_cache_is_insert)
HANDLE_COMMON = types.SimpleNamespace(
    release_kv_cache=_release_kv_cache_checkpoint, match_kv_cache=lambda req, cache: None,
    checkpoint_kv_cache=lambda req, cache: None)


@pytest.mark.parametrize(("common", "base", "expected"), [
    (LEGACY_COMMON, _CacheFinishedBase, compat.LEGACY),
    (LEGACY_COMMON, _FinishBesideBase, compat.LEGACY),
    (LEGACY_COMMON, _InsertReqBase, compat.LEGACY),
    (HANDLE_COMMON, _HandleBase, compat.HANDLES),
    (HANDLE_COMMON, _CacheFinishedBase, None),  # handle functions, but no tree lock
    (types.SimpleNamespace(), _CacheFinishedBase, None),
], ids=["0.5.11", "0.5.20", "0.5.21", "0.5.22", "no-lock", "no-release"])
def test_lifecycle_is_read_from_the_functions(common: Any, base: type,
                                              expected: str | None) -> None:
    assert compat.lifecycle(common, base) == expected


# ------------------------------------------------------------------ server args
class _Context:
    def __init__(self, with_setter: bool) -> None:
        self.published: list[Any] = []
        if with_setter:
            self.set_server_args = self.published.append


def test_server_args_go_where_the_release_reads_them() -> None:
    published: list[Any] = []
    module = types.SimpleNamespace(set_global_server_args_for_scheduler=published.append)
    context = _Context(with_setter=True)  # 0.5.15 on
    compat.server_args_publisher(module, types.SimpleNamespace(get_context=lambda: context))(1)
    bare = _Context(with_setter=False)  # 0.5.14: a runtime context without server args
    compat.server_args_publisher(module, types.SimpleNamespace(get_context=lambda: bare))(2)
    compat.server_args_publisher(module, None)(3)  # 0.5.11: no runtime context
    assert context.published == [1] and published == [2, 3]
    with pytest.raises(LookupError):
        compat.server_args_publisher(types.SimpleNamespace(), None)


@dataclasses.dataclass
class _DataclassArgs:  # to 0.5.19: __post_init__ resolves the model from a hub
    model_path: str | None = None
    page_size: int = 1

    def __post_init__(self) -> None:
        raise AssertionError("resolved a model")


class _StructArgs:  # 0.5.20 on (a msgspec.Struct): resolution is a separate step
    def __init__(self, model_path: str) -> None:
        self.model_path = model_path


def test_default_server_args_never_resolve_a_model() -> None:
    def fields_only(cls: type) -> Any:
        args: Any = object.__new__(cls)
        args.model_path = None
        return args

    assert isinstance(compat.default_server_args(_DataclassArgs, fields_only), _DataclassArgs)
    struct = compat.default_server_args(_StructArgs, fields_only)
    assert struct.model_path == compat.NO_MODEL


def test_accepted_drops_keywords_the_signature_does_not_name() -> None:
    def params_0_5_20(disable: bool, tree_components: Any = None) -> None:
        return None

    def params_any(**kwargs: Any) -> None:
        return None

    offered = {"disable": False, "tree_components": None, "tree_core_backend": "python"}
    assert compat.accepted(params_0_5_20, offered) == {"disable": False,
                                                       "tree_components": None}
    assert compat.accepted(params_any, offered) == offered
    assert compat.takes(params_0_5_20, "disable") and not compat.takes(params_0_5_20, "x")


# ------------------------------------------------------------------ the request
class _ListReq:  # 0.5.11, 0.5.12
    def __init__(self, rid: str, text: str, ids: list[int], sampling: Any) -> None:
        self.origin_input_ids = ids
        self.output_ids: list[int] = []
        self.fill_ids: list[int] = []


class _ArrayReq:  # 0.5.14: arrays, fill_len over the full ids
    def __init__(self, rid: str, text: str, ids: Any, sampling: Any) -> None:
        self.origin_input_ids, self.output_ids = array("q", ids), array("q")
        self.full_untruncated_fill_ids, self.fill_len = array("q"), 0


class _RangeReq(_ArrayReq):  # 0.5.15 on
    def set_extend_range(self, start: int, end: int) -> None:
        self.extend_range = (start, end)


def test_request_shape_probes() -> None:
    assert not compat.tokens_in_arrays(_ListReq, None)
    assert compat.tokens_in_arrays(_ArrayReq, None)
    old, mid, new = _ListReq("a", "", [1, 2], None), _ArrayReq("b", "", [1, 2], None), \
        _RangeReq("c", "", [1, 2], None)
    assert compat.fill_field(old) == "fill_ids"
    assert compat.fill_field(mid) == "full_untruncated_fill_ids"
    assert not compat.has_extend_range(mid) and compat.has_extend_range(new)


def test_mark_extend_writes_the_field_the_cache_reads() -> None:
    old, mid, new = _ListReq("a", "", [1, 2], None), _ArrayReq("b", "", [1, 2], None), \
        _RangeReq("c", "", [1, 2], None)
    for req in (old, mid, new):
        req.output_ids.extend([3])
        compat.mark_extend(req, 1, 3, refresh=True)
    assert old.fill_ids == [1, 2, 3]
    assert mid.full_untruncated_fill_ids == array("q", [1, 2, 3]) and mid.fill_len == 3
    assert new.extend_range == (1, 3) and new.full_untruncated_fill_ids == array("q")


def test_kv_fields_are_found_on_the_request_or_its_kv_record() -> None:
    on_req = types.SimpleNamespace(kv_committed_len=4, req_pool_idx=1)  # 0.5.11-0.5.15
    lazy = types.SimpleNamespace(kv=types.SimpleNamespace(kv_allocated_len=4),
                                 kv_committed_len=4, req_pool_idx=2)  # 0.5.17-0.5.19
    record = types.SimpleNamespace(kv=types.SimpleNamespace(  # 0.5.20 on
        kv_committed_len=4, kv_allocated_len=4, req_pool_idx=3, mamba_pool_idx=None))
    assert [compat.kv_get(r, "req_pool_idx") for r in (on_req, lazy, record)] == [1, 2, 3]
    for req in (on_req, lazy, record):
        compat.kv_set(req, "kv_committed_len", 9)
    assert on_req.kv_committed_len == lazy.kv_committed_len == record.kv.kv_committed_len == 9
    assert compat.kv_holder(lazy, "kv_allocated_len") is lazy.kv
    assert compat.kv_get(on_req, "mamba_pool_idx", None) is None
    with pytest.raises(AttributeError):
        compat.kv_get(on_req, "mamba_pool_idx")


# ------------------------------------------------------------------ the tree
@dataclasses.dataclass
class _DecParams:
    swa_uuid_for_lock: Any = None


def test_locks_keep_the_receipt_the_release_releases_with() -> None:
    base = types.SimpleNamespace(DecLockRefParams=_DecParams)
    receipt = _DecParams(swa_uuid_for_lock=7)
    result = types.SimpleNamespace(swa_uuid_for_lock=5, to_dec_params=lambda: receipt)
    new = types.SimpleNamespace(lock_receipt=None)  # 0.5.20 on: the Req keeps a receipt
    compat.keep_lock(new, result, swa=False)
    assert compat.unlock_params(new, base, swa=False) is receipt
    old = types.SimpleNamespace()  # before (0.5.12 has to_dec_params too): the SWA uuid
    compat.keep_lock(old, result, swa=True)
    assert compat.unlock_params(old, base, swa=True) == _DecParams(swa_uuid_for_lock=5)
    plain = types.SimpleNamespace()
    compat.keep_lock(plain, types.SimpleNamespace(swa_uuid_for_lock=None), swa=False)
    assert compat.unlock_params(plain, base, swa=False) is None
    assert compat.has_tree_lock(_HandleBase) and not compat.has_tree_lock(_CacheFinishedBase)


def test_own_class_is_none_where_the_release_dropped_it() -> None:
    class MambaRadixCache:
        pass

    assert compat.own_class(types.SimpleNamespace(MambaRadixCache=MambaRadixCache),
                            "MambaRadixCache") is MambaRadixCache
    assert compat.own_class(None, "MambaRadixCache") is None  # 0.5.21: module gone
    assert compat.own_class(types.SimpleNamespace(), "SWARadixCache") is None


def test_a_release_not_verified_runs_with_a_sentence_naming_those_that_were() -> None:
    assert all(glue.Release(version, None).untested is None for version in glue.TESTED)
    between = glue.Release("0.5.16.post1", None).untested  # a build never verified
    assert between is not None and "is not one of the releases" in between
    assert ", ".join(glue.TESTED) in between
    newer = glue.Release("0.6.0", None).untested
    assert newer is not None and "is newer than the releases" in newer
