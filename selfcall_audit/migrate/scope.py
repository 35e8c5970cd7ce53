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

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_NEW_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
# Calls that read a function's local variables by name: an alias they may read must stay.
_LOCALS_READERS = frozenset({"locals", "vars", "eval", "exec"})


class _Binders(cst.CSTVisitor):
    """The nodes that bind `name`, by every construct Python has. With `own_scope`, only those of
    the visited function's own scope: nested functions, lambdas and classes bind their name and
    nothing more, and a comprehension's `for` targets stay inside it."""

    def __init__(self, name: str, root: cst.CSTNode | None):
        super().__init__()
        self.name = ident(name)
        self.root = root  # the scope whose own bindings are wanted; None: everywhere
        self.found: list[cst.CSTNode] = []

    def _target(self, owner: cst.CSTNode, target: cst.CSTNode | None) -> None:
        if binds(target, self.name):
            self.found.append(owner)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.root is None or node is self.root:
            return super().on_visit(node)
        match node:
            case cst.FunctionDef(name=name) | cst.ClassDef(name=name):
                self._target(node, name)
                return False
            case cst.Lambda():
                return False
            case cst.CompFor():
                node.iter.visit(self)
                for condition in node.ifs:
                    condition.visit(self)
                if node.inner_for_in is not None:
                    node.inner_for_in.visit(self)
                return False
        return super().on_visit(node)

    def visit_Param(self, node: cst.Param) -> None:
        self._target(node, node.name)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node, node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node, node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node, node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._target(node, node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node, node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._target(node, node.target)

    def visit_AsName(self, node: cst.AsName) -> None:  # import, with and except `as`
        self._target(node, node.name)

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node, node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._target(node, node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._target(node, node.name)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is None and (dotted_name(node.name) or "").split(".")[0] == self.name:
            self.found.append(node)

    def visit_Global(self, node: cst.Global) -> None:
        self._target(node, next((i.name for i in node.names if ident(i.name.value) == self.name), None))

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self._target(node, next((i.name for i in node.names if ident(i.name.value) == self.name), None))

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        self._target(node, node.name)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        self._target(node, node.name)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        self._target(node, node.rest)

    def visit_TypeAlias(self, node: cst.TypeAlias) -> None:
        self._target(node, node.name)


def bindings(node: cst.CSTNode, name: str, own_scope: bool = False) -> list[cst.CSTNode]:
    """The nodes in `node` that bind `name` (only in `node`'s own scope with `own_scope`)."""
    binders = _Binders(name, node if own_scope else None)
    node.visit(binders)
    return binders.found


def helper_binding(module: cst.Module, helper: Helper, callee: str) -> cst.CSTNode | None:
    """Anything in the file that binds `callee` other than an import of the helper itself:
    a call of `callee` there might reach it instead of the helper."""
    provides: set[cst.CSTNode] = set()
    for node in m.findall(module, m.ImportFrom()):
        assert isinstance(node, cst.ImportFrom)
        if module_name(node) == helper.module and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                if dotted_name(alias.name) == helper.name:
                    provides.add(alias if alias.asname is None else alias.asname)
    return next((node for node in bindings(module, callee) if node not in provides), None)


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
            clauses = m.findall(scope, m.CompFor())
            if any(isinstance(c, cst.CompFor) and binds(c.target, name) for c in clauses):
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


def rebinding(method: cst.FunctionDef, name: str) -> cst.CSTNode | None:
    """A statement of the method's own scope that binds `name` again (`self = other`)."""
    found = bindings(method.body, name, own_scope=True)
    return found[0] if found else None


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
    for node in m.findall(function, m.Call(func=m.Name())):
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
        if node.func.value in _LOCALS_READERS and not (node.func.value == "vars" and node.args):
            return True
    return False


def nested_scopes(ancestors: Sequence[cst.CSTNode], method_index: int) -> list[cst.CSTNode]:
    """The functions, lambdas and comprehensions between the method and the call."""
    return [node for node in ancestors[method_index + 1 :] if isinstance(node, _NEW_SCOPES + COMPREHENSIONS)]


def streamed_response(ancestors: Sequence[cst.CSTNode], method: cst.FunctionDef) -> str | None:
    """`r.content.iter_chunked(...)` and the like on the response bound by `r = await <call>`."""
    parent = ancestors[-1]
    holder = ancestors[-2] if isinstance(parent, cst.Await) and len(ancestors) > 1 else parent
    if isinstance(holder, cst.Assign) and len(holder.targets) == 1:
        target = holder.targets[0].target
    elif isinstance(holder, cst.AnnAssign):
        target = holder.target
    else:
        return None
    if not isinstance(target, cst.Name):
        return None
    name = target.value
    uses = reads = 0  # `r.content`, and `r.content.read` among them: one walk of the method
    stack: list[cst.CSTNode] = [method]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute):
            if _is_content(node, name):
                uses += 1
            elif node.attr.value == "read" and _is_content(node.value, name):
                reads += 1
        stack.extend(node.children)
    return f"{name}.content" if uses > reads else None


def _is_content(node: cst.CSTNode, name: str) -> bool:
    """`name.content`, as the matcher `Attribute(value=Name(name), attr=Name("content"))` reads it."""
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == name
        and node.attr.value == "content"
    )
