"""Installed into a clean copy's .venv: imports the copy's packages, as ``make install`` would.

``pip install -e .`` writes a meta path finder that maps each top-level package
of ``[tool.setuptools.packages.find]`` to its folder in the checkout, appended
after the path finders (so a package on ``sys.path``, the current folder of
``python -m`` say, wins over it, as it does over the real one). This is that
finder, pointed at the copy: nothing else of the copy (``examples``, ``tests``,
``bench``) becomes importable from elsewhere, which is what lets the docs test
see a command that only works when the current folder is on ``sys.path``.
Standard library only: it runs from a ``.pth`` file at interpreter start-up.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType


class CopyFinder:
    """Finds the mapped top-level packages; their submodules are found by their __path__."""

    def __init__(self, root: Path, packages: Sequence[str]) -> None:
        self.folders = {name: root / name for name in packages}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def install(root: str, packages: str) -> None:
    """Called by the .pth line: the copy's root and its packages, comma-separated."""
    sys.meta_path.append(CopyFinder(Path(root), packages.split(",")))
