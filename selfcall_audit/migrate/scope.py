"""Names around a call: which method's `self` it sees, what rebinds or shadows that `self`, what
binds the helper's name, what a removed part of the call binds, and whether a function reads its
locals by name. The codemod asks these questions; `policy` decides what the answers mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m

from .fixes import Helper
from .imports import dotted_name, ident, module_name
from .walk import children, descendants

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_NEW_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
# Calls that read a function's local variables by name: an alias they may read must stay.
_LOCALS_READERS = frozenset({"locals", "vars", "eval", "exec"})


# The field holding the name each binding construct binds (`import`, `global` and `nonlocal`
# statements are read apart): the `as` of an import, a `with` and an `except` is an `AsName`.
_TARGETS: dict[type[cst.CSTNode], str] = {
    cst.Param: "name",
    cst.AssignTarget: "target",
    cst.AnnAssign: "target",
    cst.AugAssign: "target",
    cst.NamedExpr: "target",
    cst.For: "target",
    cst.CompFor: "target",
    cst.AsName: "name",
    cst.Del: "target",
    cst.FunctionDef: "name",
    cst.ClassDef: "name",
    cst.MatchAs: "name",
    cst.MatchStar: "name",
    cst.MatchMapping: "rest",
    cst.TypeAlias: "name",
}


def target(node: cst.CSTNode) -> cst.CSTNode | None:
    """What the node itself binds, as written (`a, *b` of `a, *b = ...`), when it is a binding
    construct other than an import, `global` or `nonlocal` statement."""
    field = _TARGETS.get(type(node))
    return None if field is None else getattr(node, field)


def _binds_here(node: cst.CSTNode, name: str) -> bool:
    """Does the node itself bind `name` (an identifier, normalised)?"""
    if type(node) in _TARGETS:
        return binds(target(node), name)
    if isinstance(node, cst.ImportAlias):
        return node.asname is None and (dotted_name(node.name) or "").split(".")[0] == name
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return any(ident(item.name.value) == name for item in node.names)
    return False


def bindings(node: cst.CSTNode, name: str, own_scope: bool = False) -> list[cst.CSTNode]:
    """The nodes in `node` that bind `name`, by every construct Python has, in no particular order.
    With `own_scope`, only those of `node`'s own scope: nested functions, lambdas and classes bind
    their name and nothing more, and a comprehension's `for` targets stay inside it."""
    name = ident(name)
    found: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if own_scope and current is not node:
            if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
                if binds(current.name, name):
                    found.append(current)
                continue
            if isinstance(current, cst.Lambda):
                continue
            if isinstance(current, cst.CompFor):
                stack += [current.iter, *current.ifs]
                if current.inner_for_in is not None:
                    stack.append(current.inner_for_in)
                continue
        if _binds_here(current, name):
            found.append(current)
        stack += children(current)
    return found


def helper_bindings(module: cst.Module, helper: Helper, callee: str) -> list[cst.CSTNode]:
    """What in the file binds `callee` other than an import of the helper itself: a call of
    `callee` there might reach it instead of the helper."""
    provides: set[cst.CSTNode] = set()
    for node in descendants(module):
        if not isinstance(node, cst.ImportFrom) or isinstance(node.names, cst.ImportStar):
            continue
        if module_name(node) == helper.module:
            for alias in node.names:
                if dotted_name(alias.name) == helper.name:
                    provides.add(alias if alias.asname is None else alias.asname)
    return [node for node in bindings(module, callee) if node not in provides]


def enclosing_method(ancestors: Sequence[cst.CSTNode]) -> tuple[cst.FunctionDef | None, str | None, int]:
    """The innermost method around the call, its `self` (None for a static or class method), and
    where in `ancestors` it stands."""
    for index in range(len(ancestors) - 1, 1, -1):
        node = ancestors[index]
        if isinstance(node, cst.FunctionDef) and isinstance(ancestors[index - 2], cst.ClassDef):
            decorators = {dotted_name(d.decorator) for d in node.decorators}
            params = [*node.params.posonly_params, *node.params.params]
            if decorators & {"staticmethod", "classmethod"} or not params:
                return node, None, index
            return node, ident(params[0].name.value), index
    return None, None, -1


def shadows(scopes: Sequence[cst.CSTNode], name: str) -> bool:
    """Does a function, lambda, class or comprehension between the method and the call bind `name`?"""
    for scope in scopes:
        if isinstance(scope, COMPREHENSIONS):
            if any(isinstance(c, cst.CompFor) and binds(c.target, name) for c in descendants(scope)):
                return True
        elif bindings(scope, name, own_scope=True):
            return True
    return False


def binds(target: cst.CSTNode | None, name: str) -> bool:
    """Does an assignment to `target` bind `name` (`name`, `a, name`, `[*name]`)?"""
    match target:
        case cst.Name(value=value):
            return ident(value) == ident(name)
        case cst.Tuple(elements=elements) | cst.List(elements=elements):
            return any(binds(element.value, name) for element in elements)
        case cst.StarredElement(value=value):
            return binds(value, name)
    return False


def walrus_targets(parts: Sequence[cst.CSTNode]) -> tuple[str, ...]:
    """Names that `:=` binds inside `parts`."""
    names = []
    for part in parts:
        for node in m.findall(part, m.NamedExpr(target=m.Name())):
            assert isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name)
            names.append(node.target.value)
    return tuple(dict.fromkeys(names))


def first_call(parts: Sequence[cst.CSTNode]) -> str | None:
    """The first call, `await` or `yield` inside `parts`: work that removing them would skip."""
    for part in parts:
        for node in m.findall(part, m.Call() | m.Await() | m.Yield()):
            match node:
                case cst.Call(func=func):
                    return f"{dotted_name(func) or '...'}()"
                case cst.Await():
                    return "await"
                case _:
                    return "yield"
    return None


def reads_locals(function: cst.FunctionDef) -> bool:
    """`locals()`, `vars()`, `eval` or `exec` inside: any local may be read by its name."""
    return any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value in _LOCALS_READERS
        and not (node.func.value == "vars" and node.args)
        for node in descendants(function)
    )


def nested_scopes(ancestors: Sequence[cst.CSTNode], method_index: int) -> list[cst.CSTNode]:
    """The functions, lambdas and comprehensions between the method and the call."""
    return [node for node in ancestors[method_index + 1 :] if isinstance(node, _NEW_SCOPES + COMPREHENSIONS)]
