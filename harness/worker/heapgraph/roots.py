"""Where a chain of references may start: module globals, classes, locals of running frames.

CPython 3.11 does not show running frames to the collector, so their locals
are read and matched by identity. Reading a running frame's locals makes
CPython keep a snapshot of them until that function returns, so the frames
of the code searching (which hold its samples) are left out.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from harness.worker.frames import short
from harness.worker.heapgraph.census import type_name
from harness.worker.heapgraph.naming import label


@dataclass
class Roots:
    """What a chain may start from: module globals, classes, locals of running frames."""

    modules: dict[int, str]  # id(module.__dict__) -> module name
    local_edges: dict[int, tuple[str, str]]  # id(local value) -> (edge name, root)
    frames: list[Any] = field(default_factory=list)  # keeps the frames (and ids) valid

    @classmethod
    def here(cls, skip_files: Container[str] = ()) -> Roots:
        """The roots now; frames running code from ``skip_files`` (the caller's, whose
        locals hold its samples) and this function's own are no roots."""
        modules: dict[int, str] = {}
        for name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None) if module is not None else None
            if isinstance(namespace, dict):
                modules.setdefault(id(namespace), name)
        roots = cls(modules, {})
        for frame in _running_frames():
            filename = frame.f_code.co_filename
            if filename == __file__ or filename in skip_files:
                continue
            variables = frame.f_locals
            if variables is frame.f_globals:
                continue  # module-level code: its locals are the module's globals
            roots.frames.append(frame)
            where = f"{short(filename)}:{frame.f_lineno}"
            owner = label(frame)
            root = f"frame {owner.split(' ')[1]} at {where}"
            for var, value in list(variables.items()):
                roots.local_edges.setdefault(id(value), (f"{owner}.{var}", root))
            del variables
        return roots

    def of(self, obj: object) -> str | None:
        """The root ``obj`` is, or None. A local of a running frame first: the object
        a function holds is the interesting end, not the module it came from."""
        local = self.local_edges.get(id(obj))
        if local is not None:
            return local[1]
        if id(obj) in self.modules:
            return f"module {self.modules[id(obj)]}"
        kind = type(obj)  # not isinstance: a proxy's __class__ is not asked
        if issubclass(kind, types.ModuleType):
            return f"module {getattr(obj, '__name__', '?')}"  # one not in sys.modules
        if issubclass(kind, type):
            return f"class {type_name(cast(type, obj))}"
        return None

    def ids(self) -> tuple[int, int, int]:
        """The ids of this object's own containers, which a search must not follow."""
        return id(self.frames), id(self.modules), id(self.local_edges)


def _running_frames() -> Iterator[types.FrameType]:
    seen: set[int] = set()
    for top in list(sys._current_frames().values()):
        frame: types.FrameType | None = top
        while frame is not None and id(frame) not in seen:
            seen.add(id(frame))
            yield frame
            frame = frame.f_back
