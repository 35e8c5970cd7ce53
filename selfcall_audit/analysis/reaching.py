"""Which bindings of a name can reach a call, read from Python's own `ast`: what `migrate/flow.py`
works out on libcst's tree for `fix`, here for `scan`, which never imports libcst. Both answer in
`policy.Reach`, and `policy.name_blocker` judges both answers, so that a finding `scan` calls
fixable is one `fix` rewrites. Names are compared after NFKC normalisation, as Python compares
identifiers.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .names import COMPREHENSIONS, FUNCTIONS, bindings, binds, binds_here, ident, named
from .policy import Definition, Reach

if TYPE_CHECKING:
    from .policy import DefinitionForm

State = frozenset[ast.AST]
_UNBOUND = ast.Pass()  # stands for "no binding yet" in a state
_TRY = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)
_FORMS: tuple[tuple[type, DefinitionForm], ...] = (
    (ast.arg, "param"),
    (ast.Assign, "assign"),
    (ast.AnnAssign, "assign"),
    (ast.alias, "import"),
    (ast.AugAssign, "augmented"),
    (ast.NamedExpr, "walrus"),
    (ast.For, "for"),
    (ast.AsyncFor, "for"),
    (ast.Delete, "delete"),
    (ast.ExceptHandler, "except"),
    (ast.withitem, "with"),
)


def line_of(node: ast.AST) -> int:
    if isinstance(node, ast.withitem):
        return (node.optional_vars or node.context_expr).lineno
    return getattr(node, "lineno", 0)


def form_of(node: ast.AST) -> DefinitionForm:
    if node is _UNBOUND:
        return "unbound"
    return next((form for kind, form in _FORMS if isinstance(node, kind)), "other")


class _Flow:
    """Reaching definitions of one name through one function's statements: for each statement,
    header expression and nested definition, the bindings that can be current when it runs."""

    def __init__(self, name: str, bound: bool):
        self.name = name
        self.states: dict[ast.AST, State] = {}
        self.breaks: list[State] = []
        # Most names a function reads its body never binds (`self`, a module's constant): then no
        # part of it needs searching, and a flow costs no walk per statement.
        self.bound = bound

    def _bindings(self, node: ast.AST | Sequence[ast.AST]) -> list[ast.AST]:
        return bindings(node, self.name, own_scope=True) if self.bound else []

    def _record(self, node: ast.AST, state: State) -> None:
        self.states[node] = self.states.get(node, frozenset()) | state

    def _at(self, node: ast.AST | None, state: State) -> State:
        """The state after evaluating `node` (an expression or header part), recorded if the call is in it."""
        if node is None:
            return state
        defs = self._bindings(node)
        self._record(node, state.union(defs))  # a `:=` in the same expression may run first
        if not defs:
            return state
        if all(isinstance(d, ast.NamedExpr) for d in defs):
            return state | set(defs)  # a `:=` may sit in a branch that does not run
        return frozenset(defs)

    def block(self, body: Sequence[ast.stmt], state: State) -> State:
        for statement in body:
            state = self.statement(statement, state)
        return state

    def statement(self, node: ast.stmt, state: State) -> State:
        match node:
            case ast.Return() | ast.Raise():
                self._at(node, state)
                return frozenset()
            case ast.Break():
                self.breaks.append(state)
                return frozenset()
            case ast.Continue():  # back to the loop's head, which holds every binding of the body
                return frozenset()
            case ast.If(test=test, body=body, orelse=orelse):
                state = self._at(test, state)
                return self.block(body, state) | self.block(orelse, state)
            case ast.For() | ast.AsyncFor() | ast.While():
                return self._loop(node, state)
            case ast.With(items=items, body=body) | ast.AsyncWith(items=items, body=body):
                for item in items:
                    state = self._at(item, state)
                inside = self._bindings(body)
                return self.block(body, state) | state | set(inside)  # a context manager may swallow an error
            case ast.Match(subject=subject, cases=cases):
                state = self._at(subject, state)
                ends = state
                for case in cases:
                    entry = self._at(case.pattern, state)
                    entry = self._at(case.guard, entry) if case.guard is not None else entry
                    ends |= self.block(case.body, entry)
                return ends
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                for decorator in node.decorator_list:
                    state = self._at(decorator, state)
                self._record(node, state)
                return frozenset({node}) if ident(node.name) == self.name else state
        if isinstance(node, _TRY):
            return self._try(node, state)
        return self._at(node, state)  # a simple statement

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While, state: State) -> State:
        """At the loop's head, any binding in its body can be current (from an earlier pass)."""
        outer, self.breaks = self.breaks, []
        looping = isinstance(node, (ast.For, ast.AsyncFor))
        if looping:
            state = self._at(node.iter, state)  # type: ignore[union-attr]
        target = looping and binds(node.target, self.name)  # type: ignore[union-attr]
        head = state.union(self._bindings(node.body), (node,) if target else ())
        if isinstance(node, ast.While):
            head = self._at(node.test, head)
        self.block(node.body, frozenset({node}) if target else head)
        broken = frozenset().union(*self.breaks)
        self.breaks = outer
        finished = self.block(node.orelse, head) if node.orelse else head
        return finished | broken

    def _try(self, node: ast.Try, state: State) -> State:
        raised = state | set(self._bindings(node.body))  # an error may come after any binding
        ends = self.block(node.body, state)
        if node.orelse:
            ends = self.block(node.orelse, ends)
        for handler in node.handlers:
            entry = frozenset({handler}) if named(handler.name, self.name) else raised
            ends |= self.block(handler.body, entry)
        if node.finalbody:
            ends = self.block(node.finalbody, ends | raised)
        return ends


class Flows:
    """Reaching definitions in one module, each function's worked out once per name however many
    calls ask (a file with hundreds of self-calls in one method stays linear)."""

    def __init__(self, module: ast.Module):
        self.module = module
        self._own: dict[tuple[ast.AST, str], list[ast.AST]] = {}
        self._flows: dict[tuple[ast.AST, str], tuple[dict[ast.AST, State], int | None]] = {}
        self._globals: dict[str, Reach] = {}
        self._walked: dict[ast.AST, list[ast.AST]] = {}

    @property
    def globals_read(self) -> bool:
        """Has an answer needed the module's own bindings of a name (see `global_reach`)?"""
        return bool(self._globals)

    def own(self, scope: ast.AST, name: str) -> list[ast.AST]:
        """What binds `name` in a function's own scope (`global` and `nonlocal` statements
        included). Its scope is searched only when something in the function other than a
        parameter binds the name, as one look at each of its nodes tells: most names, a method's
        `self` above all, are bound by a parameter or nowhere."""
        if (scope, name) not in self._own:
            parameters = _parameters(scope)
            if any(binds_here(node, name) and node not in parameters for node in self.walked(scope)):
                found = bindings(scope, name, own_scope=True)
            else:
                found = [node for node in parameters if binds_here(node, name)]
            self._own[scope, name] = [node for node in found if node is not scope]
        return self._own[scope, name]

    def in_body(self, function: ast.AST, name: str) -> list[ast.AST]:
        """What binds `name` in the statements of a function's own scope (not its parameters,
        decorators or annotations), from the one search of `own`."""
        body = function.body  # type: ignore[attr-defined]
        start = (body[0].lineno, body[0].col_offset)
        return [node for node in self.own(function, name) if (line_of(node), _column(node)) >= start]

    def reach(
        self, scopes: Sequence[ast.AST], ancestors: Sequence[ast.AST], call: ast.Call, name: str
    ) -> Reach:
        """Every binding of `name` that can reach `call`. `scopes`: the method, then each function,
        lambda and comprehension between it and the call, outermost first; `ancestors`: the path
        from the module down to the call."""
        return self.local_reach(scopes, ancestors, call, name) or self.global_reach(name)

    def global_reach(self, name: str) -> Reach:
        """The module's bindings of `name` (see `global_reach`), worked out once."""
        name = ident(name)
        if name not in self._globals:
            self._globals[name] = global_reach(self.module, name)
        return self._globals[name]

    def local_reach(
        self, scopes: Sequence[ast.AST], ancestors: Sequence[ast.AST], call: ast.Call, name: str
    ) -> Reach | None:
        """`reach` when the scopes around the call decide it; None when `name` is a global there:
        the answer is then the module's, not the method's (see `around.Sites`)."""
        name = ident(name)
        owner = None
        for scope in reversed(scopes):
            if isinstance(scope, (*COMPREHENSIONS, ast.Lambda)):
                found = bindings(scope, name)
                if found and not all(isinstance(node, ast.NamedExpr) for node in found):
                    return Reach(name, "nested", ())  # a `:=` binds in the function around it
                continue
            own = self.own(scope, name)
            if any(isinstance(node, ast.Global) for node in own):
                break
            if own and not any(isinstance(node, ast.Nonlocal) for node in own):
                owner = scope
                break
        if owner is None:
            return None
        states, writer = self.flow(owner, name)
        path = [*ancestors, call]
        inner = path[path.index(owner) + 1 :]
        closure = next((n for n in inner if isinstance(n, (*FUNCTIONS, ast.Lambda))), None)
        point = closure or call
        at = path.index(point)
        found = set(next((states[n] for n in reversed(path[: at + 1]) if n in states), frozenset()))
        if closure is not None:  # it runs later: any binding of the name can be current then
            found |= set(self.own(owner, name))
        start = line_of(point)
        definitions = {
            Definition("unbound", 0, False)
            if d is _UNBOUND
            else Definition(form_of(d), line_of(d), line_of(d) > start)
            for d in found
        }
        return Reach(
            name,
            "function",
            tuple(sorted(definitions, key=lambda d: (d.line, d.form))),
            closure=closure is not None,
            nonlocal_line=writer,
        )

    def flow(self, owner: ast.AST, name: str) -> tuple[dict[ast.AST, State], int | None]:
        """The states through `owner` for `name`, and the line of a nested function that rebinds
        it through `nonlocal`."""
        if (owner, name) not in self._flows:
            flow = _Flow(name, bool(self.in_body(owner, name)))
            params = [p for p in bindings(owner.args, name) if isinstance(p, ast.arg)]  # type: ignore[attr-defined]
            flow.block(owner.body, frozenset(params) if params else frozenset({_UNBOUND}))  # type: ignore[attr-defined]
            nested = [
                n for n in self.walked(owner) if n is not owner and isinstance(n, (*FUNCTIONS, ast.Lambda))
            ]
            writer = next((line_of(n) for n in nested if self._rebinds(n, name)), None)
            self._flows[owner, name] = (flow.states, writer)
        return self._flows[owner, name]

    def walked(self, function: ast.AST) -> list[ast.AST]:
        """Every node of `function`, in `ast.walk`'s order: one walk for the questions that read
        them all (its nested functions, its attribute reads)."""
        if function not in self._walked:
            self._walked[function] = list(ast.walk(function))
        return self._walked[function]

    def _rebinds(self, function: ast.AST, name: str) -> bool:
        """Does `function` declare `name` nonlocal and bind it?"""
        own = self.own(function, name)
        return len(own) > 1 and any(isinstance(node, ast.Nonlocal) for node in own)


def _parameters(scope: ast.AST) -> list[ast.arg]:
    """A function's or lambda's parameters (none for another scope)."""
    arguments = getattr(scope, "args", None)
    if not isinstance(arguments, ast.arguments):
        return []
    extra = [p for p in (arguments.vararg, arguments.kwarg) if p is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _column(node: ast.AST) -> int:
    if isinstance(node, ast.withitem):
        return node.context_expr.col_offset
    return getattr(node, "col_offset", 0)


def global_reach(module: ast.AST, name: str) -> Reach:
    """A global: its module-level bindings, and any function's `global` statement that rebinds it."""
    own = [node for node in bindings(module, name, own_scope=True) if not isinstance(node, ast.Global)]
    writer = next(
        (n for n in ast.walk(module) if isinstance(n, ast.Global) and any(named(g, name) for g in n.names)),
        None,
    )
    definitions = tuple(Definition(form_of(node), line_of(node)) for node in own)
    return Reach(
        name,
        "module",
        definitions or (Definition("unbound", 0),),
        global_line=None if writer is None else line_of(writer),
    )
