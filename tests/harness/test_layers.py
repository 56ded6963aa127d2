"""The layering rules of docs/architecture.md, checked on the code.

Every ``import`` statement in the tree (lazy ones inside functions included) is
read with ``ast``: against the order of the layers (each imports only the layers
below it), against the finer forbidden boundaries, and as graphs, of modules and
of top-level packages, that must have no cycle. The worker's real start path, the
command line's and every face's are imported in a clean interpreter, which also
catches what a module pulls in indirectly.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.harness.conftest import ROOT

# Stdlib-only leaves that any layer may import, though their package is forbidden to
# it: names the contract shares with the layer that owns them, and the names
# `leak-harness record` and the recorder it starts agree on.
LEAVES = ("harness.worker.sampler_names", "harness.worker.frames", "harness.record.env")
# The vocabulary at the bottom: stdlib only, so every layer may read it.
STDLIB_ONLY = ("harness.errors", "harness.verdicts", "harness.units", "harness.budgets",
               "harness.basis", "harness.provenance", *LEAVES)
# The layers, top to bottom, as docs/architecture.md lists them: a module imports only modules
# of its own layer or of the layers below it. A module's layer is the one naming the
# longest prefix of its name (``harness.suite`` is the contract's, ``harness.errors``
# the vocabulary's).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("faces", ("leak_harness",)),
    ("reports", ("reports",)),
    ("scenarios", ("scenarios",)),
    ("parent", ("harness.parent",)),
    ("record", ("harness.record",)),
    ("worker", ("harness.worker",)),
    ("analysis", ("harness.analysis",)),
    ("history", ("harness.history",)),
    ("contract", ("harness",)),
    ("runfiles", ("harness.runfiles",)),
    ("vocabulary", STDLIB_ONLY),
    ("refcache", ("refcache",)),
)
# package prefix -> prefixes it must never import (eagerly or lazily); the rules of
# every prefix a module is within apply to it.
FORBIDDEN = {
    # The faces sit on top: nothing below them imports them.
    "refcache": ("harness", "scenarios", "reports", "leak_harness"),
    "scenarios": ("leak_harness", "reports"),
    # The engine draws nothing: only the faces call reports.
    "harness": ("refcache", "scenarios", "reports", "leak_harness"),
    "harness.worker": ("harness.parent", "harness.analysis", "harness.configure"),
    # The recorder runs inside someone else's program: the worker's rules, and the
    # hooks module (harness.record itself) imports nothing of the harness at all.
    "harness.record": ("harness.parent", "harness.analysis", "harness.configure"),
    # The libraries the samplers share sit below them and never call back up.
    "harness.worker.heapgraph": ("harness.worker.samplers",),
    "harness.worker.glibc": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.worker.frames": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.worker.resources": ("harness.worker.samplers", "harness.worker.heapgraph"),
    "harness.analysis": ("harness.parent", "harness.worker"),
    "harness.runfiles": ("harness.parent", "harness.worker", "harness.analysis"),
    # The parent reads the recorder's names (the leaf harness.record.env), never the
    # recorder: that would load every sampler into each `leak-harness` start.
    "harness.parent": ("harness.record",),
    # The supervisor watches a run; it decides nothing from the samples' statistics.
    "harness.parent.supervisor": ("harness.analysis",),
    # The contract: what a run is, built from the vocabulary below it, never from the
    # layers that carry it out.
    "harness.config": ("harness.worker", "harness.analysis", "harness.parent"),
    "harness.configure": ("harness.worker", "harness.analysis", "harness.parent"),
    "harness.history": ("harness.parent", "harness.worker"),
    # Reports render what the summary holds; they never analyse.
    "reports": ("harness.parent", "harness.worker", "leak_harness", "harness.analysis"),
}
# What the worker process may not load at all: the parent's side, plotting, statistics.
WORKER_NEVER = ("harness.parent", "leak_harness", "harness.analysis", "harness.configure",
                "reports", "matplotlib", "numpy", "scipy")
# What no face loads by being imported: the measuring side, and the reports (drawn
# lazily, so matplotlib stays off the run path and out of every start).
FACES_NEVER = ("harness.worker.samplers", "harness.worker.heapgraph", "harness.record.recorder",
               "reports", "matplotlib")
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


PACKAGES = ("refcache", "scenarios", "harness", "reports", "leak_harness")


def modules(packages: tuple[str, ...] = PACKAGES) -> Iterator[tuple[str, Path]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield module_name(path), path


def layer_of(name: str) -> int:
    """The index in LAYERS of the layer naming the longest prefix of ``name``."""
    found = [(len(prefix), index) for index, (_, prefixes) in enumerate(LAYERS)
             for prefix in prefixes if within(name, prefix)]
    assert found, f"{name} is in no layer of LAYERS"
    return max(found)[1]


def test_every_module_imports_only_its_layer_and_the_layers_below() -> None:
    graph = import_graph()
    broken = [f"{name} ({LAYERS[layer_of(name)][0]}) imports {imported} "
              f"({LAYERS[layer_of(imported)][0]}, above it)"
              for name, imported_names in graph.items() for imported in imported_names
              if layer_of(imported) < layer_of(name)]
    assert not broken, "\n".join(sorted(broken))


def test_the_layers_name_every_package() -> None:
    assert {prefix.split(".")[0] for _, prefixes in LAYERS for prefix in prefixes} == set(
        PACKAGES)


def test_no_module_imports_across_a_forbidden_layer_boundary() -> None:
    broken = []
    for name, path in modules():
        rules = [bad for layer, bad in FORBIDDEN.items() if within(name, layer)]
        for imported in set(imports(path)):
            if any(within(imported, leaf) for leaf in LEAVES):
                continue
            if any(within(imported, bad) for rule in rules for bad in rule):
                broken.append(f"{name} imports {imported}")
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
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named.update(f"{node.module}.{alias.name}"
                             if f"{node.module}.{alias.name}" in names else node.module
                             for alias in node.names)
        graph[name] = (named & names) - {name}
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


def test_no_import_cycle_between_packages() -> None:
    """Modules collapsed to their top-level package (harness, reports, ...): no two
    packages import each other, however indirectly."""
    packages: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for name, imported_names in import_graph().items():
        top = name.split(".")[0]
        packages[top] |= {imported.split(".")[0] for imported in imported_names} - {top}
    cycle = find_cycle(packages)
    assert cycle is None, "package cycle: " + " -> ".join(cycle or ())


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


def loaded_by(*args: str) -> list[str]:
    """The modules ``python -X importtime <args>`` loads, run from the checkout, as it
    names them on stderr (what it ran may exit, as ``--version`` does)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and line[12:].strip()[:1].isdigit()]


@pytest.mark.parametrize("args", [("-c", "import leak_harness.cli"),
                                  ("-m", "leak_harness", "--version")])
def test_a_cli_start_loads_no_command_and_nothing_of_the_worker(args: tuple[str, ...]) -> None:
    """``leak-harness --version`` (and every start) imports each command only when it
    runs: no sampler, heap-graph module or recorder, no report, no matplotlib."""
    loaded = loaded_by(*args)
    assert "leak_harness.cli" in loaded
    assert [m for m in loaded if any(within(m, bad) for bad in FACES_NEVER)] == []
    assert [m for m in loaded if within(m, "leak_harness.cli") and m not in (
        "leak_harness.cli", "leak_harness.cli.project_config")] == []


def test_no_face_loads_the_worker_side_or_the_reports() -> None:
    """Every command and the pytest plugin, imported together: the parent's side never
    loads the samplers (the recorder's names come from its leaf), and reports are
    drawn lazily."""
    from leak_harness.cli import COMMANDS

    faces = sorted({where.partition(":")[0] for where in COMMANDS.values()})
    loaded = loaded_by("-c", "; ".join(f"import {face}" for face in
                                       (*faces, "leak_harness.pytest_plugin")))
    assert set(faces) <= set(loaded)
    assert [m for m in loaded if any(within(m, bad) for bad in FACES_NEVER)] == []
