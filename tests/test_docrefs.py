"""Module references written in docstrings and comments name code that exists.

Docstrings and comments point readers at first-party code with dotted names
(a module, a module's function, a class's attribute). When code moves, nothing
checks those names, and they go stale. This test collects every dotted name that
starts with a first-party package in the docstrings and comments of the
repository's Python files and resolves it without importing anything:

- the longest module prefix, found with ``importlib.machinery.PathFinder``
  one package level at a time inside this checkout (no parent package is
  imported, so no torch, and never an installed copy of another checkout);
- then the next part, looked up among the module's top-level names with
  ``ast`` (definitions, assignments, imports, also under ``if``/``try``).
  Deeper parts (a class's attribute) are not checked: a class may get them from
  a base class, a dataclass field or ``__init__``.

It also fails on mentions of a design document that is not in the repository.
A failure lists ``path:line: reference``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cache
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("harness", "reports", "refcache", "scenarios", "bench", "examples", "tests")
PACKAGES = ("harness", "reports", "refcache", "scenarios", "bench")
# Spelled in two parts so that this file does not mention it.
MISSING_DOCUMENT = "DESIGN" + ".md"

# A first-party package name, then at least one ".name"; not part of a longer
# dotted name, a path (docs/reports.html) or a word (test-harness.x).
REFERENCE = re.compile(r"(?<![\w./-])(?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+")
# A file name ("harness.py"), unless it resolves (``reports.render.html`` is a module).
FILE_SUFFIXES = frozenset({"py", "pyi", "json", "md", "html", "toml", "txt", "sqlite"})


@dataclass(frozen=True)
class Mention:
    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"


def python_files() -> list[Path]:
    files: list[Path] = []
    for folder in FOLDERS:
        files.extend(
            p for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts
        )
    return files


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the file's comments and docstring lines.

    Docstrings: every string that is a whole statement (module, class and
    function docstrings, attribute docstrings), read from the source lines so
    that the line numbers are exact.
    """
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            end = node.end_lineno or node.lineno
            out.extend((n, lines[n - 1]) for n in range(node.lineno, end + 1))
    return out


IMPORT_LINE = re.compile(r"\s*(?:from|import)\s")


def mentions(path: Path) -> list[Mention]:
    found: list[Mention] = []
    source = path.read_text(encoding="utf-8")
    if not any(REFERENCE.search(ln) and not IMPORT_LINE.match(ln) for ln in source.splitlines()):
        return found  # nothing but imports names a package: no need to tokenize and parse
    for line, text in prose_lines(path):
        for match in REFERENCE.finditer(text):
            found.append(Mention(path, line, match.group(0)))
    return found


@cache
def find_module(name: str) -> ModuleSpec | None:
    """The spec of first-party module ``name`` in this checkout, importing nothing."""
    parent = name.rpartition(".")[0]
    if not parent:
        search = [str(ROOT)]
    else:
        spec = find_module(parent)
        if spec is None or not spec.submodule_search_locations:
            return None
        search = list(spec.submodule_search_locations)
    return PathFinder.find_spec(name, search)


def _bound_names(stmts: list[ast.stmt]) -> tuple[set[str], bool]:
    """Names a module's top level binds, and whether it may bind any (``*``, ``__getattr__``)."""
    names: set[str] = set()
    open_ended = False

    def targets(t: ast.expr) -> None:
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for elt in t.elts:
                targets(elt)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
            open_ended |= stmt.name == "__getattr__"
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                targets(t)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets(stmt.target)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name == "*":
                    open_ended = True
                names.add(alias.asname or alias.name)
        elif isinstance(stmt, ast.If):
            for block in (stmt.body, stmt.orelse):
                sub, more = _bound_names(block)
                names |= sub
                open_ended |= more
        elif isinstance(stmt, ast.Try):
            blocks = [stmt.body, stmt.orelse, stmt.finalbody]
            blocks += [h.body for h in stmt.handlers]
            for block in blocks:
                sub, more = _bound_names(block)
                names |= sub
                open_ended |= more
    return names, open_ended


@cache
def top_level_names(origin: str) -> tuple[frozenset[str], bool]:
    tree = ast.parse(Path(origin).read_text(encoding="utf-8"), filename=origin)
    names, open_ended = _bound_names(tree.body)
    return frozenset(names), open_ended


def is_file_name(ref: str) -> bool:
    return ref.count(".") == 1 and ref.rsplit(".", 1)[1] in FILE_SUFFIXES


def resolves(ref: str) -> bool:
    parts = ref.split(".")
    for n in range(len(parts), 0, -1):
        spec = find_module(".".join(parts[:n]))
        if spec is not None:
            break
    else:
        return False
    rest = parts[n:]
    if not rest:
        return True
    if spec.origin is None or not spec.origin.endswith(".py"):
        return False  # a namespace package: only its submodules can be named
    names, open_ended = top_level_names(spec.origin)
    return open_ended or rest[0] in names


def test_the_reference_pattern() -> None:
    """The pattern and the resolver on a few known names (guards the test itself)."""
    found = [
        m.group(0)
        for m in REFERENCE.finditer(
            "see ``harness.api``, harness.parent.runner.run. docs/reports.x, not-harness.x"
        )
    ]
    assert found == ["harness.api", "harness.parent.runner.run"]
    assert resolves("harness.parent.runner")
    assert resolves("refcache.radix.TreeNode.value")  # deeper parts: lenient
    assert not resolves("harness.no_such_module_here")
    assert not resolves("refcache.radix_tree.NoSuchName")


def test_docstring_and_comment_module_references_resolve() -> None:
    unresolved = [
        str(m)
        for path in python_files()
        for m in mentions(path)
        if not resolves(m.text) and not is_file_name(m.text)
    ]
    assert not unresolved, (
        "docstrings or comments name first-party code that does not exist:\n"
        + "\n".join(unresolved)
    )


def test_no_mention_of_a_missing_design_document() -> None:
    assert not (ROOT / MISSING_DOCUMENT).exists()  # if it comes back, drop this test
    found = [
        f"{path.relative_to(ROOT)}:{n}: {MISSING_DOCUMENT}"
        for path in python_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MISSING_DOCUMENT in line
    ]
    assert not found, (
        f"{MISSING_DOCUMENT} is not in the repository (docs/ holds the documents):\n"
        + "\n".join(found)
    )
