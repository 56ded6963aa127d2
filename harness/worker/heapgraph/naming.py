"""Names for the edges of the object graph: ``TreeNode.parent``, ``list[3]``, ``dict['key']``.

The cycle explainer and the owner paths both print chains of references;
naming them here, once, makes a cycle and an owner path through the same
attribute read the same. Functions, methods, code objects and frames are
named by qualified name and source line (``function mod.f.<locals>.g
(mod.py:12).markers``: the closure variable, straight to its cell); a
frame's edges are its local names, a class's its attributes, a dict's its keys.
Instance attributes are read through the descriptors, so no ``__getattr__``
of the object runs.
"""

from __future__ import annotations

import gc
import os
import types
from collections.abc import Iterator
from typing import Any

KEY_LABEL = 40  # characters of a dict key shown in an edge name

Edge = tuple[str, object]


def named_referents(obj: object) -> Iterator[Edge]:
    """``(edge name, target)`` for what ``obj`` refers to, attribute names where known.

    Attributes come from the instance ``__dict__`` and ``__slots__`` (read via
    the descriptors, so no ``__getattr__`` of a garbage object runs); containers
    give indices and keys; functions their closure variables and dunder
    attributes, frames their locals, classes their attributes; anything else
    the collector sees is ``Owner.<ref>``.
    """
    owner = label(obj)
    named = list(_structured(obj, owner))
    yield from named
    covered = {id(target) for _, target in named} | {id(instance_dict(obj)), id(type(obj))}
    if isinstance(obj, type):
        covered.add(id(class_dict(obj)))
    for target in gc.get_referents(obj):
        if id(target) not in covered:
            yield f"{owner}.<ref>", target


def edge_name(owner: object, target: object) -> str | None:
    """The name of the edge ``owner -> target`` (as :func:`named_referents` gives
    it), or None when ``owner`` does not refer to ``target`` in a way it names.

    Containers are searched by identity first, so a dict of a million entries
    costs one pass and one key label, not a million.
    """
    if isinstance(owner, dict):
        for key, value in list(owner.items()):
            if value is target:
                return f"{label(owner)}[{_key_label(key)}]"
            if key is target:
                return f"{label(owner)}.<key>"
        return None
    if isinstance(owner, list | tuple):
        for index, item in enumerate(list(owner)):
            if item is target:
                return f"{label(owner)}[{index}]"
        return None
    for name, value in named_referents(owner):
        if value is target:
            return name
    return None


def label(obj: object) -> str:
    """How an edge names its owner: the type's name (``TreeNode``); for code, the
    qualified name and source line (``function mod.f.<locals>.g (mod.py:12)``,
    ``method ...``, ``code ...``, ``frame ...`` at its current line); a class by name."""
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        return f"function {_qualified(obj.__module__, obj.__qualname__)} ({_where(code)})"
    if isinstance(obj, types.MethodType):
        func = obj.__func__
        if isinstance(func, types.FunctionType):
            name = _qualified(func.__module__, func.__qualname__)
            return f"method {name} ({_where(func.__code__)})"
        return "method"
    if isinstance(obj, types.CodeType):
        return f"code {_code_name(obj)} ({_where(obj)})"
    if isinstance(obj, types.FrameType):
        module = obj.f_globals.get("__name__")
        name = _qualified(module if isinstance(module, str) else None, _code_name(obj.f_code))
        return f"frame {name} ({_where(obj.f_code, obj.f_lineno)})"
    if isinstance(obj, type):
        return obj.__name__
    return type(obj).__name__


def _qualified(module: object, qualname: str) -> str:
    return f"{module}.{qualname}" if isinstance(module, str) and module else qualname


def _code_name(code: types.CodeType) -> str:
    return str(getattr(code, "co_qualname", code.co_name))  # co_qualname: 3.11+


def _where(code: types.CodeType, line: int | None = None) -> str:
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno if line is None else line}"


def class_dict(cls: type) -> dict[str, Any] | None:
    """The real dict behind a class's ``__dict__`` mapping proxy."""
    inner = gc.get_referents(cls.__dict__)
    return inner[0] if len(inner) == 1 and isinstance(inner[0], dict) else None


def _structured(obj: object, owner: str) -> Iterator[Edge]:
    if isinstance(obj, dict):
        for key, value in list(obj.items()):
            yield f"{owner}[{_key_label(key)}]", value
            if not isinstance(key, str | int | float | bytes | bool):
                yield f"{owner}.<key>", key
    elif isinstance(obj, list | tuple):
        for index, item in enumerate(list(obj)):
            yield f"{owner}[{index}]", item
    elif isinstance(obj, set | frozenset):
        for item in list(obj):
            yield f"{owner}.<item>", item
    elif isinstance(obj, types.FunctionType):
        yield from _function_edges(obj, owner)
    elif isinstance(obj, types.MethodType):
        yield f"{owner}.__self__", obj.__self__
        yield f"{owner}.__func__", obj.__func__
    elif isinstance(obj, types.CellType):
        yield from _cell_edge(obj, owner)
    elif isinstance(obj, types.FrameType):
        yield from _frame_edges(obj, owner)
    elif isinstance(obj, types.CodeType):
        yield f"{owner}.co_consts", obj.co_consts
    elif isinstance(obj, types.TracebackType):
        yield f"{owner}.tb_frame", obj.tb_frame
        if obj.tb_next is not None:
            yield f"{owner}.tb_next", obj.tb_next
    elif isinstance(obj, type):
        for key, value in list(vars(obj).items()):
            yield f"{owner}.{key}", value
    else:
        attributes = instance_dict(obj)
        if attributes is not None:
            for key, value in list(attributes.items()):
                yield f"{owner}.{key}", value
        yield from _slot_values(obj, owner)
        if isinstance(obj, BaseException):
            for name in ("__traceback__", "__context__", "__cause__", "args"):
                # through BaseException's own descriptors: no subclass property runs
                value = BaseException.__dict__[name].__get__(obj, BaseException)
                if value is not None:
                    yield f"{owner}.{name}", value


def _function_edges(func: types.FunctionType, owner: str) -> Iterator[Edge]:
    """Closure variables by name, straight to their cells; then the function's
    own attributes and its dunder references by name."""
    cells = func.__closure__ or ()
    for name, cell in zip(func.__code__.co_freevars, cells, strict=False):
        yield f"{owner}.{name}", cell
    attributes = instance_dict(func)
    if attributes is not None:
        for key, value in list(attributes.items()):
            yield f"{owner}.{key}", value
    for name in ("__closure__", "__globals__", "__builtins__", "__defaults__", "__kwdefaults__",
                 "__code__", "__annotations__"):
        value = getattr(func, name, None)
        if value is not None and not isinstance(value, str):
            yield f"{owner}.{name}", value


def _cell_edge(cell: types.CellType, owner: str) -> Iterator[Edge]:
    try:
        contents = cell.cell_contents
    except ValueError:  # an empty cell
        return
    yield f"{owner}.cell_contents", contents


def _frame_edges(frame: types.FrameType, owner: str) -> Iterator[Edge]:
    """Locals by name. Reading ``f_locals`` of a running frame makes CPython keep a
    snapshot of its locals until it returns, so only frames on a path are named."""
    try:
        variables = dict(frame.f_locals)
    except Exception:  # a frame being torn down
        variables = {}
    for name, value in variables.items():
        yield f"{owner}.{name}", value
    for name in ("f_back", "f_code", "f_globals", "f_builtins"):
        value = getattr(frame, name, None)
        if value is not None:
            yield f"{owner}.{name}", value


def instance_dict(obj: object) -> dict[str, Any] | None:
    if isinstance(obj, dict | list | tuple | set | frozenset | type):
        return None
    try:
        attributes = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None
    return attributes if isinstance(attributes, dict) else None


def _slot_values(obj: object, owner: str) -> Iterator[Edge]:
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            stored = f"_{cls.__name__.lstrip('_')}{slot}" if _is_private(slot) else slot
            descriptor = cls.__dict__.get(stored)
            try:
                value = descriptor.__get__(obj, cls)  # type: ignore[union-attr]
            except AttributeError:  # an empty slot
                continue
            yield f"{owner}.{slot}", value


def _is_private(name: str) -> bool:
    return name.startswith("__") and not name.endswith("__")


def _key_label(key: object) -> str:
    """A dict key as an edge shows it: the repr of an atom or a tuple of atoms
    (shortened), else ``<label>`` (``<function mod.f (mod.py:3)>``, ``<TreeNode>``)."""
    if _atom(key) or (type(key) is tuple and all(_atom(k) for k in key)):
        text = repr(key)
        return text if len(text) <= KEY_LABEL else text[: KEY_LABEL - 3] + "..."
    return f"<{label(key)}>"


def _atom(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bytes | bool)
