"""Mutation sites in a Python source tree: calls that give something back, dropped one at a time.

A *site* is an expression statement whose value is a call, in a function or method,
whose callee's last name says it gives something back: ``GIVES_BACK`` matches one of
its underscore-separated words (``free``, ``release``, ``dec``, ``unlock``, ``evict``,
``remove``, ``del``/``delete``, ``pop``/``popleft``/``popitem``, ``discard``,
``decrement``, ``dealloc``/``deallocate``, ``drop``, ``clear``, ``unref``), as in
``self.token_to_kv_pool_allocator.free(kv_indices)``, ``self.dec_lock_ref(node)``,
``release_kv_cache(req, tree_cache)`` or ``self.evictable_leaves.discard(node)``.
Its *mutant* is the same function with that one statement replaced by ``pass``, the
rest of the body kept: a release that lost that one call.

:func:`mutant_code` recompiles the function from its source (original file name and
line numbers, the module's globals) so its code object can be swapped onto the live
function (``function.__code__``): every holder of the function (the class, another
module's ``from ... import``, a decorator's wrapper) then runs the mutant. What cannot
be recompiled faithfully is refused with a reason (:class:`Unfaithful`): functions
nested in a function (closures over the outer call's cells), methods of a class
nested in a function, and a class-nested function whose body uses private
(name-mangled) identifiers in a nesting this module does not reproduce.
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIVES_BACK = re.compile(
    r"(?:^|_)(?:free|release|dec|decrement|unlock|evict|remove|del|delete|pop|popleft|"
    r"popitem|discard|dealloc|deallocate|drop|clear|unref)(?:_|$)")
MAKER = "_leak_harness_mutant_maker"

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class Unfaithful(Exception):
    """The site's function cannot be recompiled as it was compiled."""


@dataclass(frozen=True)
class Site:
    """One call statement that gives something back, in a function of a module."""

    module: str     # dotted module name, e.g. sglang.srt.mem_cache.radix_cache
    qualname: str   # the function's __qualname__, e.g. RadixCache.evict
    line: int       # the statement's first line
    end_line: int   # its last line
    call: str       # the statement's source text, on one line
    nested: str     # why it cannot be recompiled faithfully, or "" when it can

    @property
    def key(self) -> str:
        return f"{self.module}:{self.qualname}:{self.line}"

    @classmethod
    def parse_key(cls, key: str) -> tuple[str, str, int]:
        module, qualname, line = key.rsplit(":", 2)
        return module, qualname, int(line)


def callee_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def gives_back(stmt: ast.stmt) -> bool:
    """An expression statement calling something whose name says it gives back."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    name = callee_name(stmt.value)
    return name is not None and GIVES_BACK.search(name) is not None


def one_line(text: str) -> str:
    return " ".join(text.split())


class _Walker(ast.NodeVisitor):
    """Visits functions with their qualified names and what nests them."""

    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.lines = [line.encode() for line in source.splitlines(keepends=True)]
        self.scope: list[tuple[str, str]] = []  # ("class" | "function", name)
        self.sites: list[Site] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(("class", node.name))
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: FunctionNode) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def segment(self, stmt: ast.stmt) -> str:
        """The statement's source (``ast.get_source_segment`` splits the whole file
        again on every call, too slow for a few hundred sites in a worker's build)."""
        end_line, end_col = stmt.end_lineno, stmt.end_col_offset
        if end_line is None or end_col is None:
            return ast.unparse(stmt)
        chunk = self.lines[stmt.lineno - 1:end_line]
        if len(chunk) == 1:
            return chunk[0][stmt.col_offset:end_col].decode(errors="replace")
        chunk = [chunk[0][stmt.col_offset:], *chunk[1:-1], chunk[-1][:end_col]]
        return b"".join(chunk).decode(errors="replace")

    def _function(self, node: FunctionNode) -> None:
        qualname = qualified(self.scope, node.name)
        nested = nesting_problem(self.scope)
        for stmt in own_statements(node):
            if gives_back(stmt):
                text = self.segment(stmt)
                self.sites.append(Site(self.module, qualname, stmt.lineno,
                                       stmt.end_lineno or stmt.lineno, one_line(text), nested))
        self.scope.append(("function", node.name))
        self.generic_visit(node)
        self.scope.pop()


def qualified(scope: list[tuple[str, str]], name: str) -> str:
    parts: list[str] = []
    for kind, outer in scope:
        parts += [outer, "<locals>"] if kind == "function" else [outer]
    return ".".join([*parts, name])


def nesting_problem(scope: list[tuple[str, str]]) -> str:
    kinds = [kind for kind, _ in scope]
    if "function" in kinds:
        return "nested in a function (its closure is a call's, not recompilable alone)"
    if len(kinds) > 1:
        return "a method of a nested class"
    return ""


def own_statements(node: FunctionNode) -> Iterator[ast.stmt]:
    """The statements of a function's body at any depth, not those of nested defs."""
    stack: list[ast.AST] = list(reversed(node.body))
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(item, ast.stmt):
            yield item
        stack.extend(reversed([child for child in ast.iter_child_nodes(item)
                               if isinstance(child, (ast.stmt, ast.excepthandler,
                                                     ast.match_case))]))


def sites_in_source(module: str, source: str) -> list[Site]:
    walker = _Walker(module, source)
    walker.visit(ast.parse(source))
    return sorted(walker.sites, key=lambda s: s.line)


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def sites_in_files(root: Path, paths: list[Path]) -> list[Site]:
    """Every site of the given files under ``root`` (a site-packages folder)."""
    found: list[Site] = []
    for path in sorted(paths):
        try:
            found += sites_in_source(module_name(root, path), path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
    return found


# --- the mutant: the function recompiled with one statement replaced by pass ---


def find_function(tree: ast.Module, qualname: str) -> tuple[FunctionNode, list[str]]:
    """The def of ``qualname`` and the names of the classes around it."""
    body: list[ast.stmt] = tree.body
    classes: list[str] = []
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        match = [n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef,
                                                  ast.AsyncFunctionDef)) and n.name == part]
        if not match:
            raise Unfaithful(f"{qualname}: no {part} in the source")
        node = match[-1]  # a later definition wins, as at import
        if i == len(parts) - 1:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                raise Unfaithful(f"{qualname} is not a function")
            return node, classes
        if not isinstance(node, ast.ClassDef):
            raise Unfaithful(f"{qualname}: nested in a function")
        classes.append(node.name)
        body = node.body
    raise Unfaithful(f"{qualname}: empty name")


class _DropStatement(ast.NodeTransformer):
    """Replace the statement starting at ``line`` (a give-back call) by ``pass``."""

    def __init__(self, line: int) -> None:
        self.line, self.dropped = line, 0

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.stmt) and getattr(node, "lineno", None) == self.line \
                and gives_back(node):
            self.dropped += 1
            return ast.copy_location(ast.Pass(), node)
        return super().visit(node)


def mutated_def(source: str, qualname: str, line: int) -> tuple[FunctionNode, list[str]]:
    """The function's def with the give-back call at ``line`` replaced by ``pass``,
    its decorators removed (the live function keeps its own), and its enclosing classes."""
    node, classes = find_function(ast.parse(source), qualname)
    dropper = _DropStatement(line)
    node.body = [dropper.visit(stmt) for stmt in node.body]
    if dropper.dropped != 1:
        raise Unfaithful(f"{qualname}: no give-back call statement at line {line}")
    node.decorator_list = []
    return node, classes


def mangles(node: FunctionNode) -> bool:
    """Whether the body uses a private name the compiler mangles with the class's name."""
    for item in ast.walk(node):
        name = item.attr if isinstance(item, ast.Attribute) else \
            item.id if isinstance(item, ast.Name) else None
        if name and name.startswith("__") and not name.endswith("__"):
            return True
    return False


def mutant_code(source: str, filename: str, qualname: str, line: int,
                original: types.CodeType, namespace: dict[str, Any]) -> types.CodeType:
    """The code object of ``qualname`` from ``source`` with the statement at ``line``
    dropped, compiled as ``original`` was: same file name and line numbers, same free
    variables (a method using ``super()`` closes over ``__class__``), private names
    mangled with the enclosing class's name. ``namespace`` (the module's globals) only
    resolves the enclosing scaffolding; nothing is bound in it."""
    node, classes = mutated_def(source, qualname, line)
    if len(classes) > 1:
        raise Unfaithful(f"{qualname}: a method of a nested class")
    if mangles(node) and not classes:
        raise Unfaithful(f"{qualname}: private names outside a class")
    maker = ast.FunctionDef(
        name=MAKER, args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=v) for v in original.co_freevars],
            vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[node, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    # A class of the same name around the maker makes the compiler mangle private
    # names as it did in the real class body; the class is bound in a scratch dict.
    top: ast.stmt = maker if not classes else ast.ClassDef(
        name=classes[0], bases=[], keywords=[], body=[maker], decorator_list=[])
    tree = ast.Module(body=[top], type_ignores=[])
    ast.copy_location(maker, node)
    ast.copy_location(top, node)
    ast.fix_missing_locations(tree)
    scratch: dict[str, Any] = {}
    exec(compile(tree, filename, "exec"), namespace, scratch)  # our own AST, see above
    holder = scratch[classes[0]] if classes else None
    make = scratch[MAKER] if holder is None else next(
        v for k, v in vars(holder).items() if k.endswith(MAKER))
    code = make.__code__
    inner = next(c for c in code.co_consts if isinstance(c, types.CodeType)
                 and c.co_name == node.name)
    if inner.co_freevars != original.co_freevars:
        raise Unfaithful(f"{qualname}: free variables {inner.co_freevars} differ from the "
                         f"original's {original.co_freevars}")
    return inner


def live_function(module: Any, qualname: str) -> types.FunctionType:
    """The function object behind ``qualname`` in a live module, through
    staticmethod/classmethod/property and ``__wrapped__`` (functools.wraps) wrappers."""
    obj: Any = module
    for part in qualname.split("."):
        holder = obj
        obj = vars(holder).get(part) if isinstance(holder, type) else getattr(holder, part, None)
        if obj is None:
            raise Unfaithful(f"{qualname}: no {part} on the live {holder!r}")
    for _ in range(8):
        if isinstance(obj, types.FunctionType) and not hasattr(obj, "__wrapped__"):
            return obj
        obj = getattr(obj, "__wrapped__", None) or getattr(obj, "__func__", None) \
            or getattr(obj, "fget", None)
    raise Unfaithful(f"{qualname}: the live attribute is no Python function")


def swap(module: Any, source: str, filename: str, qualname: str, line: int) -> types.CodeType:
    """Put the mutant's code on the live function; return the original code."""
    func = live_function(module, qualname)
    original = func.__code__
    if original.co_filename != filename:
        raise Unfaithful(f"{qualname}: the live function comes from {original.co_filename}")
    if line not in {row[2] for row in original.co_lines()}:
        raise Unfaithful(f"{qualname}: the live function has no line {line}")
    func.__code__ = mutant_code(source, filename, qualname, line, original, vars(module))
    return original
