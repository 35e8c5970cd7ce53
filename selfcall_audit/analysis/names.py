"""What binds a name, read from Python's own `ast` (`migrate/scope.py` reads the same on libcst's
tree): every construct Python binds a name by, the variables an expression reads, and the method
around a node with the name its first parameter binds (`self`). Names are compared after NFKC
normalisation, as Python compares identifiers."""

from __future__ import annotations

import ast
import unicodedata
from collections.abc import Sequence

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def ident(name: str) -> str:
    """An identifier as Python reads it: NFKC-normalised (a fullwidth `s` in `self` is `s`)."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def binds(target: ast.AST | None, name: str) -> bool:
    """Does an assignment to `target` bind `name` (`name`, `a, name`, `[*name]`)?"""
    match target:
        case ast.Name(id=value):
            return ident(value) == name
        case ast.Tuple(elts=elements) | ast.List(elts=elements):
            return any(binds(element, name) for element in elements)
        case ast.Starred(value=value):
            return binds(value, name)
    return False


def named(value: str | None, name: str) -> bool:
    return value is not None and ident(value) == name


BINDERS = frozenset(
    {
        ast.arg, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For, ast.AsyncFor,
        ast.comprehension, ast.withitem, ast.Delete, ast.alias, ast.ExceptHandler, ast.FunctionDef,
        ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal, ast.MatchAs, ast.MatchStar,
        ast.MatchMapping, *(getattr(ast, "TypeAlias", ast.Assign),),
    }
)  # fmt: skip


def binds_here(node: ast.AST, name: str) -> bool:
    """Does `node` itself bind `name` (not something inside it)?"""
    if type(node) not in BINDERS:  # most nodes: asked of every node a walk meets
        return False
    match node:
        case ast.arg(arg=arg):
            return named(arg, name)
        case ast.Assign(targets=targets):
            return any(binds(t, name) for t in targets)
        case ast.AnnAssign(target=target) | ast.AugAssign(target=target) | ast.NamedExpr(target=target):
            return binds(target, name)
        case ast.For(target=target) | ast.AsyncFor(target=target) | ast.comprehension(target=target):
            return binds(target, name)
        case ast.withitem(optional_vars=target):
            return binds(target, name)
        case ast.Delete(targets=targets):
            return any(binds(t, name) for t in targets)
        case ast.alias(name=dotted, asname=asname):
            return named(asname, name) if asname else named(dotted.split(".")[0], name)
        case ast.ExceptHandler(name=handler):
            return named(handler, name)
        case ast.FunctionDef(name=own) | ast.AsyncFunctionDef(name=own) | ast.ClassDef(name=own):
            return named(own, name)
        case ast.Global(names=names) | ast.Nonlocal(names=names):
            return any(named(n, name) for n in names)
        case ast.MatchAs(name=own) | ast.MatchStar(name=own):
            return named(own, name)
        case ast.MatchMapping(rest=rest):
            return named(rest, name)
    return isinstance(node, getattr(ast, "TypeAlias", ())) and binds(node.name, name)  # type: ignore[attr-defined]


def bindings(root: ast.AST | Sequence[ast.AST], name: str, own_scope: bool = False) -> list[ast.AST]:
    """The nodes in `root` that bind `name`, in source order (only in `root`'s own scope with
    `own_scope`: nested functions, lambdas and classes bind their name and nothing more, and a
    comprehension's `for` targets stay inside it)."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(reversed(root)) if isinstance(root, Sequence) else [root]
    first = None if isinstance(root, Sequence) else root
    while stack:
        node = stack.pop()
        if binds_here(node, name) and not (own_scope and isinstance(node, ast.comprehension)):
            found.append(node)
        if own_scope and node is not first and isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return found


def read_names(parts: Sequence[ast.AST]) -> list[str]:
    """The variables `parts` read, in order (attribute names and keywords are not variables)."""
    found: list[str] = []
    for part in parts:
        stack = [part]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                found.append(ident(node.id))
            elif isinstance(node, ast.arg):
                found.append(ident(node.arg))
            else:
                stack.extend(
                    ast.iter_child_nodes(node)
                )  # in the order `fix` reads them: the same first reason
    return list(dict.fromkeys(found))


def enclosing_method(ancestors: Sequence[ast.AST]) -> tuple[ast.AST | None, str | None, int]:
    """The innermost method around the call, its `self` (None for a static or class method), and
    where in `ancestors` it stands."""
    for index in range(len(ancestors) - 1, 0, -1):
        node = ancestors[index]
        if isinstance(node, FUNCTIONS) and isinstance(ancestors[index - 1], ast.ClassDef):
            decorators = {dotted(d) for d in node.decorator_list}
            params = [*node.args.posonlyargs, *node.args.args]
            if decorators & {"staticmethod", "classmethod"} or not params:
                return node, None, index
            return node, ident(params[0].arg), index
    return None, None, -1


def dotted(node: ast.AST) -> str | None:
    """A name or an attribute chain written out (`functools.wraps`), or None for anything else."""
    if isinstance(node, ast.Name):
        return ident(node.id)
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None
