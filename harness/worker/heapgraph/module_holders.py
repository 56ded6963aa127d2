"""Which long-lived container holds what an allocation site makes, by its name.

An allocation window names the line that allocates what grows
(``body = self.rfile.read(n)``), not what keeps it (``SEEN``, a module-level
dict). The owner search cannot start from what such a line makes when the
collector does not track it (bytes, str). So, while a window still traces, the
containers that a module, or a class or object of a module, names (listed as
a window starts) are asked at its end for their newest element: a list's last
item, a dict's last value or key, a deque's right end. The site that allocated
it (its traceback, as the window's sites are named) maps to the container's
name, ``SEEN`` in ``examples/leaky_service.py``. It costs one pass over module
globals and their attributes, not a heap walk.
"""

from __future__ import annotations

import collections
import gc
import sys
import tracemalloc
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from harness.runfiles.records import SiteHolder
from harness.worker.frames import short

MIN_ENTRIES = 100  # a container with fewer entries is not what a leak grows
MAX_MODULES = 5000  # a program with more modules is searched in its first ones only

Naming = Callable[[tracemalloc.Traceback], str]


# (name, module, container, the object whose attribute it is when its name is not known
# yet: resolved only for a container found holding a site's allocations)
Named = tuple[str, str, Any, Any]


def holders_by_site(containers: Sequence[Named], site_of: Naming) -> dict[str, SiteHolder]:
    """Per allocation site, the largest of ``containers`` whose newest element it made.

    Only while tracemalloc traces (else every traceback is unknown): empty then.
    """
    found: dict[str, SiteHolder] = {}
    if not tracemalloc.is_tracing():
        return found
    for name, module, container, owner in containers:
        size = len(container)
        for element in newest(container):
            traceback = tracemalloc.get_object_traceback(element)
            if traceback is None:
                continue
            site = site_of(traceback)
            if site not in found or found[site]["entries"] < size:
                found[site] = {"name": attribute_name(name, owner, container), "module": module,
                               "type": type(container).__name__, "entries": size}
    return found


def attribute_name(name: str, owner: Any, container: Any) -> str:
    """``name.attribute`` for a container an object keeps; reading the object's
    ``__dict__`` makes one for an object that keeps its attributes inline (3.11): done
    for a holder found, never for every object a module names."""
    if owner is None:
        return name
    attributes = own_dict(owner) or {}
    return next((f"{name}.{key}" for key, value in list(attributes.items())
                 if value is container), f"{name}.<attribute>")


def named_containers() -> list[Named]:
    """Each big container a module names, directly or as an attribute of a class or object
    it names; the module by its file when it has one.

    Listed before a window traces: the pass over every module's names allocates, and
    costs ten times as much traced (0.2 s untraced beside pytest, numpy and matplotlib).
    A container that grows past MIN_ENTRIES within the window is not seen."""
    return list(module_containers())


def module_containers() -> Iterator[Named]:
    for module_name, module in list(sys.modules.items())[:MAX_MODULES]:
        names = own_dict(module)
        if names is None or module_name.split(".")[0] == "harness":
            continue
        # By its file: a spawned child's main module is both __main__ and __mp_main__.
        where = names.get("__file__")
        module_name = short(where) if type(where) is str else module_name
        for name, value in list(names.items()):
            if big(value):
                yield name, module_name, value, None
            elif issubclass(type(value), type):
                for attribute, held in list(TYPE_DICT.__get__(value).items()):
                    if big(held):
                        yield f"{name}.{attribute}", module_name, held, None
            elif not issubclass(type(value), types.ModuleType):  # a module: searched as itself
                yield from ((name, module_name, held, value) for held in held_by(value))


def held_by(value: object) -> list[Any]:
    """The big containers an object keeps as attributes, found through what the collector
    sees it refer to: reading its ``__dict__`` would make one (3.11 keeps attributes
    inline), 8,000 new blocks over a process's objects that stay for the run."""
    found: list[Any] = []
    if not type(value).__flags__ & HEAP_TYPE:  # a function, a builtin: not the program's object
        return found
    for held in gc.get_referents(value):
        if big(held):
            found.append(held)
        elif type(held) is dict:  # its __dict__, when it has one already
            found += [inner for inner in list(held.values()) if big(inner)]
    return found


HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python
# What __dict__ is on a class that keeps its attributes the usual way.
PLAIN = (types.GetSetDescriptorType, types.MemberDescriptorType)


def own_dict(value: object) -> Mapping[str, Any] | None:
    """The attributes ``value`` keeps in its ``__dict__``, read without running any of the
    program's code: no ``getattr`` (a lazy module or a proxy's ``__getattr__`` would run,
    and a deprecated attribute warns), only the type's own ``__dict__`` slot."""
    if issubclass(type(value), type):  # not isinstance: it reads value.__class__
        return TYPE_DICT.__get__(value)  # type: ignore[no-any-return]
    for klass in type(value).__mro__:
        slot = TYPE_DICT.__get__(klass).get("__dict__")
        if slot is not None:
            held = slot.__get__(value) if type(slot) in PLAIN else None
            return held if type(held) is dict else None
    return None


TYPE_DICT = type.__dict__["__dict__"]  # a class's attributes, past any metaclass


# Exact types: a subclass's own __len__ or __getitem__ would run the program's code
# inside a window, on the main thread of a recorded program between two of its bytecodes.
CONTAINERS = (list, dict, collections.deque, collections.OrderedDict, collections.defaultdict)


def big(value: object) -> bool:
    return type(value) in CONTAINERS and len(value) >= MIN_ENTRIES  # type: ignore[arg-type]


def newest(container: Any) -> list[object]:
    """The element (or, for a dict, value and key) added last."""
    try:
        if isinstance(container, dict):
            key = next(reversed(container))
            return [container[key], key]
        return [container[-1]]
    except (StopIteration, IndexError, KeyError, RuntimeError, TypeError):
        return []  # emptied or changed under us (another thread): nothing to say
