"""Import glue: SGLang's ``mem_cache`` on a CPU-only machine, without a server.

What SGLang's cache code needs at import is far less than its package imports on
the way. This module does exactly four things, each for a measured reason:

1. **Finds the release** (:func:`locate`): an ``sglang`` already importable (a
   user's SGLang environment) wins; else the folder named by ``LEAK_HARNESS_SGLANG``
   (a ``pip install --target`` folder, or a version installed by
   ``python -m scenarios.sglang.install`` under ``.sglang/<version>/site``); else the
   newest release installed under ``.sglang/``. The variable does not start with
   ``SGL_``/``SGLANG_``: SGLang reads every such variable (``sglang/srt/environ.py``).
2. **Bypasses two package ``__init__`` files**: ``sglang/__init__.py`` imports the
   frontend language and ``transformers`` patches, and ``sglang/srt/configs/__init__.py``
   imports every model config (``transformers``); ``mem_cache`` needs neither (it
   imports ``sglang.srt.configs.mamba_utils`` and the like directly). Both packages
   are entered as bare packages whose ``__path__`` is the real folder, so their
   submodules import as usual.
3. **Stands in for third-party modules that are absent** (:data:`STAND_INS`): they
   are imported at module level somewhere on the path from ``mem_cache`` (kernels
   decorated with ``triton.jit``, ``sgl_kernel`` ops, typing imports of servers and
   tokenizers) but never called by the cache logic on a CPU. A stand-in is made only
   when the real module cannot be found, so a real SGLang environment uses its own.
   Each stand-in is a module whose every attribute is an inert object (callable,
   usable as a decorator or base class); :func:`stand_ins_used` names those made.
4. **Makes ``torch.compile`` a no-op** while importing: SGLang compiles a few helpers
   at import (``@torch.compile``), and without a working triton the inductor import
   fails; the cache logic never calls them on the paths the scenarios drive.

When the release cannot be imported all the same, :class:`GlueError` says which
module is missing in one sentence.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where a release lives: a folder holding the ``sglang`` package (pip's ``--target``).
ENV_VAR = "LEAK_HARNESS_SGLANG"
# The releases the target was verified on: doctor clean and the LRU verdicts checked
# (docs/sglang.md, "Releases verified"); make test installs 0.5.11, 0.5.17 and 0.5.23.
# Any other release runs too: the adapters probe what it has (compat.py), not its number.
TESTED = ("0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18",
          "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
ROOT = Path(__file__).resolve().parents[2] / ".sglang"  # python -m scenarios.sglang.install

# Third-party modules SGLang imports at module level on the way to ``mem_cache`` that
# the cache logic never calls on a CPU. Measured: the modules a stand-in was made for
# when importing the caches, ``schedule_batch`` and ``common`` of 0.5.11, 0.5.17 and
# 0.5.23 here (``stand_ins_used()``); each is made only when the real one is absent.
STAND_INS: dict[str, str] = {
    "triton": "GPU kernels (@triton.jit) defined beside the pools; a CPU build has no driver",
    "sgl_kernel": "SGLang's CUDA ops, imported by the pools and utils",
    "tvm_ffi": "FFI of SGLang's JIT kernels (0.5.23)",
    "flashinfer": "attention kernels, imported by utils",
    "deep_gemm": "GPU GEMM kernels imported by the MoE layers on the way (0.5.11)",
    "cuda": "CUDA Python bindings",
    "pynvml": "GPU queries",
    "torch_memory_saver": "GPU memory release around the pools (off here)",
    "torchvision": "multimodal utils; its wheels pin another torch",
    "transformers": "model config and tokenizer types (the two bypassed __init__ files)",
    "huggingface_hub": "model download helpers",
    "safetensors": "weight loading helpers",
    "sentencepiece": "tokenizers",
    "compressed_tensors": "quantization configs",
    "gguf": "GGUF quantization config",
    "einops": "tensor reshapes in model layers (0.5.17)",
    "xgrammar": "constrained decoding (schedule_batch's grammar types)",
    "openai": "server protocol types (schedule_batch's reasoning parser)",
    "partial_json_parser": "function-call parsing",
    "pydantic": "server request schemas",
    "pydantic_core": "server request schemas",
    "starlette": "HTTP server",
    "zmq": "scheduler <-> tokenizer sockets",
    "orjson": "JSON of the server",
    "pybase64": "image payloads",
    "IPython": "notebook helpers",
    "tqdm": "progress bars",
}
# Attributes of a stand-in that raise as the real module does on a machine without a GPU,
# for code that probes the device in a try block (fla/utils.py: triton's active driver).
RAISING = {"triton.runtime.driver.active": "triton has no active GPU driver here (stand-in)"}
# Modules the cache logic really executes: a stand-in would break it, so when absent
# they are named as missing (install them: ``python -m scenarios.sglang.install``).
REAL = ("msgspec", "dill", "numpy", "torch")
# Package ``__init__`` files that only pull in the server, the frontend and model configs.
BYPASSED = ("sglang", "sglang.srt.configs")


class GlueError(RuntimeError):
    """The release cannot be imported here: one sentence saying why."""


@dataclass
class Release:
    """An importable SGLang release and what the glue did to import it."""

    version: str
    site: Path | None  # the folder put on sys.path, or None for an installed sglang
    stand_ins: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.version)

    @property
    def untested(self) -> str | None:
        """A sentence when this release is not one the target was verified on: it runs
        (a warning, not a refusal); an API no probe knows fails with SGLang's error."""
        if self.version == "unknown" or self.version in TESTED:
            return None
        where = ("newer than" if self.key > version_key(TESTED[-1])
                 else "not one of")
        return (f"SGLang {self.version} is {where} the releases this target was tested "
                f"on ({', '.join(TESTED)}): it runs on what its capabilities probe to, and "
                f"a call whose API changed fails with SGLang's own error")


def version_key(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


# ------------------------------------------------------------------ stand-ins
class _InertMeta(type):
    """Class attributes a stand-in base would have had (``Model.model_rebuild()``) are inert."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _Inert(f"{cls.__name__}.{attr}")


class _InertBase(metaclass=_InertMeta):
    """What a class deriving from a stand-in derives from instead (takes any arguments)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Inert:
    """Whatever a stand-in module hands out: callable, subscriptable, a decorator,
    a base class (``class K(triton.Config)`` subclasses :class:`_InertBase`), falsy."""

    def __init__(self, name: str) -> None:
        self.__name = name

    def __getattr__(self, attr: str) -> _Inert:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        name = f"{self.__name}.{attr}"
        if name in RAISING:
            raise RuntimeError(RAISING[name])
        return _Inert(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator: keep the function
        return _Inert(f"{self.__name}()")

    def __getitem__(self, item: Any) -> _Inert:
        return self

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __or__(self, other: Any) -> Any:
        return self

    def __ror__(self, other: Any) -> Any:
        return self

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (_InertBase,)

    def __repr__(self) -> str:
        return f"<stand-in {self.__name}>"


class _StandInModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _Inert(f"{self.__name__}.{attr}")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes a stand-in for an absent module of :data:`STAND_INS` (and its submodules)."""

    def __init__(self, tops: Sequence[str]) -> None:
        self.tops = frozenset(tops)
        self.made: list[str] = []
        self._probing: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top not in self.tops or fullname in self._probing:
            return None
        if top == fullname and self._real(fullname):
            return None
        if top != fullname and top in sys.modules and not isinstance(
                sys.modules[top], _StandInModule):
            return None  # a real package: its submodules are real too
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _real(self, name: str) -> bool:
        self._probing.add(name)
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            return False
        finally:
            self._probing.discard(name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        module.__dict__["__version__"] = "0.0.0"  # version checks compare strings
        if "." not in spec.name:
            self.made.append(spec.name)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


# ------------------------------------------------------------------ the release
def locate() -> Path | None:
    """The folder to put on sys.path, or None when ``sglang`` is importable already."""
    chosen = os.environ.get(ENV_VAR, "").strip()
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        if (path / "site" / "sglang").is_dir():
            path = path / "site"
        if not (path / "sglang").is_dir() and (ROOT / chosen / "site" / "sglang").is_dir():
            path = ROOT / chosen / "site"  # a bare version: LEAK_HARNESS_SGLANG=0.5.23
        if not (path / "sglang").is_dir():
            raise GlueError(f"{ENV_VAR}={chosen!r} names no folder holding the sglang package "
                            f"(install one with: python -m scenarios.sglang.install VERSION)")
        return path
    if "sglang" in sys.modules or importlib.util.find_spec("sglang") is not None:
        return None
    installed = sorted((p for p in ROOT.glob("*/site") if (p / "sglang").is_dir()),
                       key=lambda p: version_key(p.parent.name))
    if not installed:
        raise GlueError(f"no SGLang release found: install one with 'python -m "
                        f"scenarios.sglang.install 0.5.23' or set {ENV_VAR} to its folder")
    return installed[-1]


def _version_of(site: Path | None) -> str:
    from importlib import metadata

    if site is None:
        try:
            return metadata.version("sglang")
        except metadata.PackageNotFoundError:
            return "unknown"
    for dist in site.glob("sglang-*.dist-info"):
        return dist.name[len("sglang-"):-len(".dist-info")]
    return "unknown"


def _bypass_init(name: str) -> None:
    """Enter package ``name`` as a bare package over its real folder (no ``__init__``)."""
    if name in sys.modules:
        return
    parent, _, leaf = name.rpartition(".")
    if parent:
        base = [Path(p) for p in importlib.import_module(parent).__path__]
    else:
        base = [Path(p) for p in sys.path if p and (Path(p) / name).is_dir()]
    folders = [str(b / leaf) for b in base if (b / leaf / "__init__.py").is_file()]
    if not folders:
        raise GlueError(f"the package {name} is not on the path")
    module = types.ModuleType(name)
    module.__path__ = folders
    module.__file__ = None
    module.__package__ = name
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = folders
    module.__spec__ = spec
    placeholders: dict[str, type] = {}

    def placeholder(attr: str) -> type:
        """A model config class the bypassed ``__init__`` would have exported: an empty
        class of that name, so ``isinstance(config, Qwen3NextConfig)`` is simply False."""
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr not in placeholders:
            placeholders[attr] = type(attr, (), {"__module__": name, "model_type": attr})
        return placeholders[attr]

    module.__dict__["__getattr__"] = placeholder  # PEP 562: the module's own __getattr__
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], leaf, module)


@contextlib.contextmanager
def _compile_as_no_op() -> Iterator[None]:
    import torch

    original = torch.compile

    def compile_no_op(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(...) with options
            return lambda fn: fn
        return model

    torch.compile = compile_no_op
    try:
        yield
    finally:
        torch.compile = original


_RELEASE: Release | None = None
_FINDER: _StandInFinder | None = None


def load() -> Release:
    """Make ``sglang.srt.mem_cache`` importable (once per process) and say what it took."""
    global _RELEASE, _FINDER
    if _RELEASE is not None:
        return _RELEASE
    site = locate()
    if site is not None and str(site) not in sys.path:
        sys.path.append(str(site))  # after the environment's own packages
    for name in REAL:
        if importlib.util.find_spec(name) is None:
            raise GlueError(f"SGLang's cache code needs the module {name!r}, which is not "
                            f"installed (python -m scenarios.sglang.install installs it)")
    finder = _StandInFinder([name for name in STAND_INS if name not in REAL])
    sys.meta_path.append(finder)  # last: only what no other finder has
    _FINDER = finder
    for name in BYPASSED:
        _bypass_init(name)
    _RELEASE = Release(_version_of(site), site, finder.made)
    return _RELEASE


def located_version() -> str:
    """The version of the release :func:`load` imports (or has imported), read from its
    files: nothing is imported and no stand-in finder installed, so a parent process can
    ask before any worker starts."""
    if _RELEASE is not None:
        return _RELEASE.version
    return _version_of(locate())


def import_modules(names: Sequence[str]) -> list[types.ModuleType]:
    """Import SGLang modules after :func:`load`; a missing module is one sentence."""
    load()
    modules: list[types.ModuleType] = []
    with _compile_as_no_op(), warnings.catch_warnings():
        # Importing the quantization layers warns that only CUDA/HIP/XPU run AWQ and GGUF.
        warnings.filterwarnings("ignore", message="Only CUDA")
        # fla/utils.py (0.5.11, 0.5.17) warns it rolls back to CPU without a triton driver.
        warnings.filterwarnings("ignore", message="Triton is not supported")
        for name in names:
            try:
                modules.append(importlib.import_module(name))
            except ModuleNotFoundError as exc:
                raise GlueError(
                    f"importing {name} needs the module {exc.name!r}, which is neither "
                    f"installed nor covered by a stand-in (scenarios/sglang/glue.py)") from None
            except ImportError as exc:
                raise GlueError(f"importing {name} failed: {exc}") from None
    return modules


def stand_ins_used() -> list[str]:
    """The absent third-party modules a stand-in replaced in this process."""
    return list(_FINDER.made) if _FINDER is not None else []
