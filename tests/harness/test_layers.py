"""The layering rules of the README's architecture section, checked on the code.

Three checks: every ``import`` statement in the tree (lazy ones inside functions
included) read with ``ast`` against the forbidden boundaries, the same imports
as a graph that must have no cycle, and the worker's real start path imported
in a clean interpreter, which also catches what a module pulls in indirectly.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.harness.conftest import ROOT

# package prefix -> prefixes it must never import (eagerly or lazily)
FORBIDDEN = {
    "refcache": ("harness", "scenarios", "reports"),
    "harness": ("refcache", "scenarios"),
    "harness.worker": ("harness.parent", "leak_harness", "harness.analysis", "harness.configure",
                       "reports"),
    # The recorder runs inside someone else's program: the worker's rules, and the
    # hooks module (harness.record itself) imports nothing of the harness at all.
    "harness.record": ("harness.parent", "leak_harness", "harness.analysis", "harness.configure",
                       "reports"),
    # The libraries the samplers share sit below them and never call back up.
    "harness.worker.heapgraph": ("harness.worker.samplers",),
    "harness.worker.glibc": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.worker.frames": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.worker.resources": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.analysis": ("harness.parent", "harness.worker", "leak_harness.cli", "reports"),
    "harness.runfiles": ("harness.parent", "harness.worker", "leak_harness", "harness.analysis",
                         "reports"),
    "harness.parent": ("leak_harness.cli", "reports"),
    # The supervisor watches a run; it decides nothing from the samples' statistics.
    "harness.parent.supervisor": ("harness.analysis",),
    # The contract: what a run is, built from the vocabulary below it, never from the
    # layers that carry it out.
    "harness.config": ("harness.worker", "harness.analysis", "harness.parent", "leak_harness"),
    "harness.configure": ("harness.worker", "harness.analysis", "harness.parent", "leak_harness"),
    "harness.history": ("harness.parent", "harness.worker", "leak_harness", "reports"),
    # Reports render what the summary holds; they never analyse.
    "reports": ("harness.parent", "harness.worker", "leak_harness", "harness.analysis"),
}
# Stdlib-only leaves that any layer may import, though their package is forbidden to
# it: names the contract shares with the layer that owns them.
LEAVES = ("harness.worker.sampler_names", "harness.worker.frames")
# The vocabulary at the bottom: stdlib only, so every layer may read it.
STDLIB_ONLY = ("harness.units", "harness.budgets", "harness.basis", *LEAVES)
# Only the faces draw reports, and always lazily (matplotlib stays off the run path).
REPORT_FACES = ("leak_harness.cli", "leak_harness.pytest_plugin")
# What the worker process may not load at all: the parent's side, plotting, statistics.
WORKER_NEVER = ("harness.parent", "leak_harness.cli", "harness.analysis", "harness.configure",
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


PACKAGES = ("refcache", "scenarios", "harness", "reports")


def modules(packages: tuple[str, ...] = ("refcache", "harness", "reports")) -> Iterator[
        tuple[str, Path]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield module_name(path), path


def test_no_module_imports_across_a_forbidden_layer_boundary() -> None:
    broken = []
    for name, path in modules():
        rules = [bad for layer, bad in FORBIDDEN.items() if within(name, layer)]
        for imported in set(imports(path)):
            if any(within(imported, leaf) for leaf in LEAVES):
                continue
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


def test_the_vocabulary_and_the_leaves_import_the_standard_library_only() -> None:
    # Each other, too: budgets read sizes with the units.
    found = {name: path for name, path in modules()}
    for name in STDLIB_ONLY:
        outside = sorted(i for i in imports(found[name]) if i.split(".")[0] not in
                         (*sys.stdlib_module_names, "__future__")
                         and not any(within(i, low) for low in STDLIB_ONLY))
        assert outside == [], f"{name} imports {outside}"


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules its import statements name (lazy and TYPE_CHECKING
    ones included). ``from a.b import c`` names ``a.b.c`` when that is a module, else
    ``a.b``; a package's ``__init__`` is an edge only where a statement names it."""
    names = {name for name, _ in modules(packages)}
    graph: dict[str, set[str]] = {}
    for name, path in modules(packages):
        graph[name] = {imported for imported in imports(path) if imported in names} - {name}
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first, iterative)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path = [root]
        stack = [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return [*path[path.index(step):], step]
            elif not state.get(step):
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(graph.get(step, ()))))
    return None


def test_no_import_cycle_anywhere() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    sample = tmp_path / "lazy.py"
    sample.write_text("def f():\n    from reports.suite import x\n    import leak_harness.cli\n")
    assert {"reports.suite", "reports.suite.x", "leak_harness.cli"} <= set(imports(sample))


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
