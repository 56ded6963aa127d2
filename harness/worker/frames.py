"""Source paths as samplers print them, and which frames are library or harness code.

Allocation sites, native sites, thread origins and owner-path roots all name
a file the same way (:func:`short`), and all leave out the frames that say
how rather than who (:func:`is_library`) or that are the harness's own
(``HARNESS_DIR``).
"""

from __future__ import annotations

import os
import sysconfig

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The standard library's frames say how, not who: a site names the innermost frame
# outside it. Installed packages stay in: the cache under test may be one of them.
LIBRARY_DIRS = tuple(
    os.path.abspath(path) for path in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
)


def is_library(filename: str) -> bool:
    return filename.startswith("<frozen") or os.path.abspath(filename).startswith(LIBRARY_DIRS)


def short(filename: str) -> str:
    """A path relative to the working directory when inside it, else as given."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
