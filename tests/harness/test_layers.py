"""The layering rules of the README's architecture section, checked on the code.

Two checks: every ``import`` statement in the tree (lazy ones inside functions
included) read with ``ast``, and the worker's real start path imported in a
clean interpreter, which also catches what a module pulls in indirectly.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.conftest import ROOT

# package prefix -> prefixes it must never import (eagerly or lazily)
FORBIDDEN = {
    "refcache": ("harness", "scenarios", "reports"),
    "harness": ("refcache", "scenarios"),
    "harness.worker": ("harness.parent", "harness.cli", "harness.analysis", "harness.configure",
                       "harness.pytest_plugin", "reports"),
    # The recorder runs inside someone else's program: the worker's rules, and the
    # hooks module (harness.record itself) imports nothing of the harness at all.
    "harness.record": ("harness.parent", "harness.cli", "harness.analysis", "harness.configure",
                       "harness.pytest_plugin", "reports"),
    # The libraries the samplers share sit below them and never call back up.
    "harness.worker.heapgraph": ("harness.worker.samplers",),
    "harness.worker.glibc": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.worker.frames": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.worker.resources": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.analysis": ("harness.parent", "harness.worker", "harness.cli", "reports"),
    "harness.runfiles": ("harness.parent", "harness.worker", "harness.cli", "reports"),
    "harness.parent": ("harness.cli", "reports"),
    "reports": ("harness.parent", "harness.worker", "harness.cli", "harness.pytest_plugin"),
}
# Only the faces draw reports, and always lazily (matplotlib stays off the run path).
REPORT_FACES = ("harness.cli", "harness.pytest_plugin")
# What the worker process may not load at all: the parent's side, plotting, statistics.
WORKER_NEVER = ("harness.parent", "harness.cli", "harness.analysis", "harness.configure",
                "reports", "matplotlib", "numpy", "scipy")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def modules() -> Iterator[tuple[str, Path]]:
    for package in ("refcache", "harness", "reports"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield module_name(path), path


def test_no_module_imports_across_a_forbidden_layer_boundary() -> None:
    broken = []
    for name, path in modules():
        rules = [bad for layer, bad in FORBIDDEN.items() if within(name, layer)]
        for imported in set(imports(path)):
            if any(within(imported, bad) for rule in rules for bad in rule):
                broken.append(f"{name} imports {imported}")
            elif within(imported, "reports") and within(name, "harness") and not any(
                within(name, face) for face in REPORT_FACES
            ):
                broken.append(f"{name} imports {imported} (only the faces draw reports)")
    assert not broken, "\n".join(sorted(broken))


def test_a_sampler_imports_no_other_sampler() -> None:
    """One module each, behind the protocol in ``base``: what two samplers share lives
    in a library below them (``heapgraph``, ``glibc``, ``frames``, ``resources``)."""
    package = "harness.worker.samplers"
    broken = []
    for name, path in modules():
        if not within(name, package) or name == package:
            continue
        for imported in set(imports(path)):
            sibling = within(imported, package) and imported != package
            if sibling and not within(imported, f"{package}.base"):
                broken.append(f"{name} imports {imported}")
    assert not broken, "\n".join(sorted(broken))


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    sample = tmp_path / "lazy.py"
    sample.write_text("def f():\n    from reports.suite import x\n    import harness.cli\n")
    assert {"reports.suite", "reports.suite.x", "harness.cli"} <= set(imports(sample))


@pytest.mark.parametrize("entry", ["harness.worker.main", "harness.worker.samplers",
                                   "harness.record.bootstrap"])
def test_the_worker_loads_nothing_of_the_parent_reports_or_statistics(entry: str) -> None:
    code = f"import sys, {entry}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    loaded = done.stdout.split()
    assert entry in loaded
    assert [m for m in loaded if any(within(m, bad) for bad in WORKER_NEVER)] == []


def test_the_recording_hooks_import_nothing_of_the_harness() -> None:
    code = "import sys, harness.record; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    harness_modules = {m for m in done.stdout.split() if within(m, "harness")}
    assert harness_modules == {"harness", "harness.record"}
