"""Which bindings of a name can reach a call: reaching definitions over one function's statements.

The analysis walks a function once, in order, and so reads `target` at a call as the binding above
it. A rewrite must not trust that where other bindings can reach the call too: a later binding in
an enclosing loop (the next pass sees it), a binding after a closure was made (the closure reads
the name when it runs), a nested function's `nonlocal` assignment, a `global` one elsewhere, an
`except ... as` or a `:=` in a comprehension. This module finds every binding that can reach the
call on some path; `policy.name_blocker` decides what the answer allows. Names are compared after
NFKC normalisation, as Python compares identifiers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from ..analysis.policy import Definition, Reach
from .imports import ident
from .scope import COMPREHENSIONS, bindings, binds
from .walk import children, descendants

if TYPE_CHECKING:
    from ..analysis.policy import DefinitionForm

State = frozenset[cst.CSTNode]
_UNBOUND = cst.Name("unbound")  # stands for "no binding yet" in a state


_FORMS: tuple[tuple[type[cst.CSTNode], DefinitionForm], ...] = (
    (cst.Param, "param"),
    (cst.AssignTarget, "assign"),
    (cst.AnnAssign, "assign"),
    (cst.ImportAlias, "import"),
    (cst.AugAssign, "augmented"),
    (cst.NamedExpr, "walrus"),
    (cst.For, "for"),
    (cst.Del, "delete"),
)


def _form(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> DefinitionForm:
    if node is _UNBOUND:
        return "unbound"
    if isinstance(node, cst.AsName):
        owner = parents.get(node)
        if isinstance(owner, cst.ImportAlias):
            return "import"
        return "except" if isinstance(owner, (cst.ExceptHandler, cst.ExceptStarHandler)) else "with"
    return next((form for kind, form in _FORMS if isinstance(node, kind)), "other")


class _Flow:
    """Reaching definitions of one name through one function's statements: for each statement,
    header expression and nested definition, the bindings that can be current when it runs
    (`states`; a `:=` inside it counts, since it may run before a call beside it)."""

    def __init__(self, name: str, bound: bool):
        self.name = name
        self.states: dict[cst.CSTNode, State] = {}
        self.breaks: list[State] = []
        # Most names a function reads its body never binds (`self`): then no part of it needs
        # searching, and a flow costs no walk per statement.
        self.bound = bound

    def _record(self, node: cst.CSTNode, state: State) -> None:
        self.states[node] = self.states.get(node, frozenset()) | state

    def _defs(self, node: cst.CSTNode | None) -> list[cst.CSTNode]:
        return bindings(node, self.name, own_scope=True) if node is not None and self.bound else []

    def _at(self, node: cst.CSTNode | None, state: State) -> State:
        """The state after evaluating `node` (an expression or header part), recorded if the call is in it."""
        defs = self._defs(node)
        if node is not None:
            self._record(node, state.union(defs))  # a `:=` in the same expression may run first
        if not defs:
            return state
        if all(isinstance(d, cst.NamedExpr) for d in defs):
            return state | set(defs)  # a `:=` may sit in a branch that does not run
        return frozenset(defs)

    def block(self, body: cst.BaseSuite | Sequence[cst.CSTNode], state: State) -> State:
        statements = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else body
        for statement in statements:
            state = self.statement(statement, state)
        return state

    def statement(self, node: cst.CSTNode, state: State) -> State:
        match node:
            case cst.SimpleStatementLine(body=smalls):
                return self.block(smalls, state)
            case cst.Return() | cst.Raise():
                self._at(node, state)
                return frozenset()
            case cst.Break():
                self.breaks.append(state)
                return frozenset()
            case cst.Continue():  # back to the loop's head, which holds every binding of the body
                return frozenset()
            case cst.If(test=test, body=body, orelse=orelse):
                state = self._at(test, state)
                return self.block(body, state) | (self.statement(orelse, state) if orelse else state)
            case cst.Else(body=body):
                return self.block(body, state)
            case cst.For() | cst.While():
                return self._loop(node, state)
            case cst.Try() | cst.TryStar():
                return self._try(node, state)
            case cst.With(items=items, body=body):
                for item in items:
                    state = self._at(item, state)
                inside = self._defs(body)
                return self.block(body, state) | state | set(inside)  # a context manager may swallow an error
            case cst.Match(subject=subject, cases=cases):
                state = self._at(subject, state)
                ends = state
                for case in cases:
                    entry = self._at(case.pattern, state)
                    entry = self._at(case.guard, entry) if case.guard is not None else entry
                    ends |= self.block(case.body, entry)
                return ends
            case cst.FunctionDef() | cst.ClassDef():
                for decorator in node.decorators:
                    state = self._at(decorator, state)
                self._record(node, state)
                own = ident(node.name.value) == self.name
                return frozenset({node}) if own else state
        return self._at(node, state)  # a small statement

    def _loop(self, node: cst.For | cst.While, state: State) -> State:
        """At the loop's head, any binding in its body can be current (from an earlier pass): one
        walk of the body, however deeply loops nest (a fixpoint would grow with the nesting)."""
        outer, self.breaks = self.breaks, []
        if isinstance(node, cst.For):
            state = self._at(node.iter, state)
        target = isinstance(node, cst.For) and binds(node.target, self.name)
        head = state.union(self._defs(node.body), (node,) if target else ())
        if isinstance(node, cst.While):
            head = self._at(node.test, head)
        self.block(node.body, frozenset({node}) if target else head)
        broken = frozenset().union(*self.breaks)
        self.breaks = outer
        finished = self.statement(node.orelse, head) if node.orelse is not None else head
        return finished | broken

    def _try(self, node: cst.Try | cst.TryStar, state: State) -> State:
        raised = state | set(self._defs(node.body))  # an error may come after any binding in the body
        ends = self.block(node.body, state)
        if node.orelse is not None:
            ends = self.statement(node.orelse, ends)
        for handler in node.handlers:
            entry = self._at(handler.name, raised) if handler.name is not None else raised
            ends |= self.block(handler.body, entry)
        if node.finalbody is not None:
            ends = self.block(node.finalbody.body, ends | raised)
        return ends


def _parents(root: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in children(node):
            parents[child] = node
            stack.append(child)
    return parents


class Flows:
    """Reaching definitions in one module, each function's computed once per name however many
    calls ask (a file with hundreds of self-calls in one method stays linear)."""

    def __init__(self, module: cst.Module, line: Callable[[cst.CSTNode], int]):
        self.module = module
        self.line = line
        self._own: dict[tuple[cst.CSTNode, str], list[cst.CSTNode]] = {}
        self._in_body: dict[tuple[cst.FunctionDef, str], list[cst.CSTNode]] = {}
        self._flows: dict[tuple[cst.CSTNode, str], tuple[dict[cst.CSTNode, State], int | None]] = {}
        self._globals: dict[str, Reach] = {}

    @property
    def module_names(self) -> frozenset[str]:
        """The names whose module-level bindings were asked for (see `region`)."""
        return frozenset(self._globals)

    def in_body(self, function: cst.FunctionDef, name: str) -> list[cst.CSTNode]:
        """What binds `name` anywhere in the function's body, nested scopes too: more than any
        part's own scope holds. One walk, however many checks ask (most find nothing: `self`)."""
        key = (function, ident(name))
        if key not in self._in_body:
            self._in_body[key] = bindings(function.body, name)
        return self._in_body[key]

    def own(self, scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
        """What binds `name` in `scope`'s own scope (`global` and `nonlocal` statements included)."""
        key = (scope, name)
        if key not in self._own:
            self._own[key] = [node for node in bindings(scope, name, own_scope=True) if node is not scope]
        return self._own[key]

    def reach(
        self, scopes: Sequence[cst.CSTNode], ancestors: Sequence[cst.CSTNode], call: cst.Call, name: str
    ) -> Reach:
        """Every binding of `name` that can reach `call`. `scopes`: the method, then each function,
        lambda and comprehension between it and the call, outermost first; `ancestors`: the path
        from the module down to the call."""
        name = ident(name)
        owner = None
        for scope in reversed(scopes):
            if isinstance(scope, (*COMPREHENSIONS, cst.Lambda)):
                found = bindings(scope, name)
                if found and not all(isinstance(node, cst.NamedExpr) for node in found):
                    return Reach(name, "nested", ())  # a `:=` binds in the function around it
                continue
            own = self.own(scope, name)
            if any(isinstance(node, cst.Global) for node in own):
                break
            if own and not any(isinstance(node, cst.Nonlocal) for node in own):
                owner = scope
                break
        if owner is None:
            if name not in self._globals:
                self._globals[name] = global_reach(self.module, name, self.line)
            return self._globals[name]
        assert isinstance(owner, cst.FunctionDef)
        states, writer = self.flow(owner, name)
        path = [*ancestors, call]
        inner = path[path.index(owner) + 1 :]
        closure = next((n for n in inner if isinstance(n, (cst.FunctionDef, cst.Lambda))), None)
        point = closure or call
        at = path.index(point)
        found = set(next((states[n] for n in reversed(path[: at + 1]) if n in states), frozenset()))
        if closure is not None:  # it runs later: any binding of the name can be current then
            found |= set(self.own(owner, name))
        start = self.line(point)
        parents = _parents(owner) if any(isinstance(d, cst.AsName) for d in found) else {}
        definitions = {
            Definition(_form(d, parents), 0, False)
            if d is _UNBOUND
            else Definition(_form(d, parents), self.line(d), self.line(d) > start)
            for d in found
        }
        return Reach(
            name,
            "function",
            tuple(sorted(definitions, key=_in_order)),
            closure=closure is not None,
            nonlocal_line=writer,
        )

    def _rebinds(self, function: cst.CSTNode, name: str) -> bool:
        """Does `function` declare `name` nonlocal and bind it?"""
        own = self.own(function, name)
        return len(own) > 1 and any(isinstance(node, cst.Nonlocal) for node in own)

    def flow(self, owner: cst.FunctionDef, name: str) -> tuple[dict[cst.CSTNode, State], int | None]:
        """The states through `owner` for `name`, and the line of a nested function that rebinds
        it through `nonlocal`."""
        key = (owner, name)
        if key not in self._flows:
            flow = _Flow(name, bool(self.in_body(owner, name)))
            params = [p for p in bindings(owner.params, name) if isinstance(p, cst.Param)]
            flow.block(owner.body, frozenset(params) if params else frozenset({_UNBOUND}))
            writer = min(
                (
                    self.line(n)
                    for n in descendants(owner.body)
                    if isinstance(n, (cst.FunctionDef, cst.Lambda)) and self._rebinds(n, name)
                ),
                default=None,
            )
            self._flows[key] = (flow.states, writer)
        return self._flows[key]


def global_reach(module: cst.Module, name: str, line: Callable[[cst.CSTNode], int]) -> Reach:
    """A global: its module-level bindings, and any function's `global` statement that rebinds it."""
    name = ident(name)
    own = [node for node in bindings(module, name, own_scope=True) if not isinstance(node, cst.Global)]
    parents = _parents(module) if any(isinstance(node, cst.AsName) for node in own) else {}
    writer = min(
        (
            line(node)
            for node in descendants(module)
            if isinstance(node, cst.Global) and _declares_name(node, name)
        ),
        default=None,
    )
    definitions = sorted((Definition(_form(node, parents), line(node)) for node in own), key=_in_order)
    return Reach(name, "module", tuple(definitions) or (Definition("unbound", 0),), global_line=writer)


def _in_order(definition: Definition) -> tuple[int, str]:
    """Definitions by line: the bindings' walk meets them in no particular order."""
    return definition.line, definition.form


def _declares_name(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, (cst.Global, cst.Nonlocal)) and any(
        ident(i.name.value) == name for i in node.names
    )


def read_names(parts: Sequence[cst.CSTNode]) -> list[str]:
    """The variables `parts` read, in order (attribute names and keywords are not variables)."""
    return list(dict.fromkeys(name for part in parts for name in _variables(part)))


def _variables(node: cst.CSTNode) -> list[str]:
    found: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        match current:
            case cst.Name(value=value):
                found.append(ident(value))
            case cst.Attribute(value=value):
                stack.append(value)
            case cst.Arg(value=value):
                stack.append(value)
            case _:
                stack.extend(current.children)
    return found
