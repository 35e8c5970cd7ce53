"""One function body walked in order: local bindings tracked, expressions turned into nodes,
and the calls resolution can use recorded as facts."""

from __future__ import annotations

import ast

from .calls import CLIENT_METHODS, ROUTING_KWARGS, CallFact, call_fact, own_name_test, worth_recording
from .expr import (
    NONE,
    SELF,
    UNKNOWN,
    Attr,
    Call,
    Const,
    DictOf,
    Expr,
    Item,
    Join,
    Local,
    Name,
    Named,
    Or,
    Param,
    Seq,
    Str,
    Unknown,
    inline,
    merge,
    prune,
)
from .facts import Binding
from .formats import built_value, field_label, percent_format
from .limits import LIMITS

_TRY_STAR = getattr(ast, "TryStar", ast.Try)  # Python 3.11+
_SCALARS = (bool, int, float)
_OPAQUE = frozenset({ast.Compare, ast.UnaryOp, ast.Starred, ast.Set, ast.Slice})


Env = dict[str, tuple[Expr, int]]


class ModuleScope:
    """What walking a function body asks of its module's extraction (`extract.ModuleExtractor`):
    classes a function defines and its imports are the module's too, and attributes stored on
    `self` are the class's."""

    instance_attrs: dict[str, list[Binding]]

    def nested_class(self, node: ast.ClassDef) -> None:
        raise NotImplementedError

    def imports_from(self, node: ast.Import | ast.ImportFrom) -> None:
        raise NotImplementedError

    def position(self, line: int, byte_col: int) -> tuple[int, int]:
        raise NotImplementedError


class FunctionWalker:
    """Walks one function body in order, tracking local bindings, and records its calls."""

    def __init__(
        self,
        module: ModuleScope,
        params: set[str],
        self_param: str | None,
        env: Env,
        shadowed: frozenset[str] = frozenset(),
    ):
        self.m = module
        self.params = params
        self.self_param = self_param
        self.env = env
        self.shadowed = shadowed
        self.locals: list[Expr] = []
        self.calls: list[CallFact] = []
        self.returns: list[Expr] = []
        self.context = "expression"  # where the expressions being walked sit
        self._aliases: list[tuple[str, int]] = []
        # parameters known here not to be the agent's own name (`if name == self.config.name:
        # return await self.responses(...)` before the post): a guarded in-process dispatch
        self.not_own: frozenset[str] = frozenset()

    # statements -----------------------------------------------------------------------
    def body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def _branches(self, bodies: list[list[ast.stmt]], keep_base: bool) -> None:
        """Walk alternative bodies from the same start and merge what they bind."""
        start = self.env
        ends: list[Env] = [dict(start)] if keep_base else []
        for stmts in bodies:
            self.env = dict(start)
            self.body(stmts)
            ends.append(self.env)
        self._branches_end(start, ends)

    def _branches_end(self, start: Env, ends: list[Env]) -> None:
        """Merge the bindings alternative bodies ended with."""
        # Only the names some branch bound, rebound or dropped need merging: a function's other
        # locals (most of them, in a long function) keep the binding they came in with.
        touched = {name for env in ends for name, binding in env.items() if start.get(name) is not binding}
        touched.update(*(start.keys() - env.keys() for env in ends))
        merged: Env = dict(start)
        for name in touched:
            seen = [env[name] for env in ends if name in env]
            if not seen:
                del merged[name]
            elif all(binding is seen[0] for binding in seen):
                merged[name] = seen[0]
            else:
                merged[name] = (merge([value for value, _ in seen]), seen[-1][1])
        self.env = merged

    def stmt(self, node: ast.stmt) -> None:
        kind = type(node)  # the most frequent statements first, without trying each pattern
        if kind is ast.Expr:
            self.expr(node.value)  # type: ignore[attr-defined]
            return
        if kind is ast.Assign:
            bound = self.expr(node.value)  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                self.bind(target, bound, node.lineno)
            return
        match node:
            case ast.AnnAssign(target=target, value=value) if value is not None:
                self.bind(target, self.expr(value), node.lineno)
            case ast.AugAssign(target=target, op=op, value=value):
                bound = self.expr(value)
                if isinstance(target, ast.Name) and isinstance(op, ast.Add):
                    self.bind(target, Join((self.expr(target), bound)), node.lineno)
                else:
                    self.bind(target, UNKNOWN, node.lineno)
            case ast.If(test=test, body=body, orelse=orelse):
                self.expr(test)
                guarded, equal = own_name_test(test, self.expr)
                if guarded is None:
                    self._branches([body, orelse], keep_base=False)
                    return
                before, start = self.not_own, self.env
                ends = []
                for stmts, other in ((body, not equal), (orelse, equal)):
                    self.env, self.not_own = dict(start), before | {guarded} if other else before
                    self.body(stmts)
                    ends.append(self.env)
                self.env = start
                self._branches_end(start, ends)
                # past an `if name == own: return ...`, the name is another server's
                leaves = bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))
                self.not_own = before | {guarded} if equal and leaves else before
            case ast.For() | ast.AsyncFor():
                self.expr(node.iter)
                self.bind(node.target, UNKNOWN, node.lineno)
                self._branches([node.body], keep_base=True)
                self.body(node.orelse)
            case ast.While(test=test, body=body, orelse=orelse):
                self.expr(test)
                self._branches([body], keep_base=True)
                self.body(orelse)
            case ast.Try() | _TRY_STAR():
                self.body(node.body)
                self._branches([h.body for h in node.handlers] + [node.orelse], keep_base=True)
                self.body(node.finalbody)
            case ast.With() | ast.AsyncWith():
                for item in node.items:
                    value = self.expr(item.context_expr, in_with=True)
                    if item.optional_vars is not None:
                        self.bind(item.optional_vars, value, node.lineno)
                self.body(node.body)
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                self.context = "decorator"
                # a closure made by `@functools.wraps(handler)` stands for the handler it wraps
                # (a route registered with it reaches that handler)
                wrapped: Expr = UNKNOWN
                for decorator in node.decorator_list:
                    value = self.expr(decorator)
                    if isinstance(value, Call) and _dotted_tail(value.func) == "wraps":
                        wrapped = value
                self.context = "expression"
                self.nested_function(node.args, node.body)
                self.env[node.name] = (wrapped, node.lineno)
            case ast.ClassDef():
                self.m.nested_class(node)  # a class built by a factory function is a class all the same
                self.env[node.name] = (UNKNOWN, node.lineno)
            case ast.Import() | ast.ImportFrom():
                self.m.imports_from(node)
                for alias in node.names:
                    self.env.pop((alias.asname or alias.name).split(".")[0], None)
            case ast.Match(subject=subject, cases=cases):
                self.expr(subject)
                self._branches([case.body for case in cases], keep_base=True)
            case ast.Return(value=value):
                self.returns.append(self.expr(value) if value is not None else NONE)
            case ast.Delete(targets=targets):
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.env.pop(target.id, None)
            case _:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.expr):
                        self.expr(child)
                    elif isinstance(child, ast.stmt):
                        self.stmt(child)

    def nested_function(self, args: ast.arguments, body: list[ast.stmt] | ast.expr) -> None:
        """Closures see the enclosing bindings; their calls belong to the enclosing function."""
        shadow = frozenset(param_names(args))
        outer_context, self.context = self.context, "default"
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.expr(default)
        self.context = outer_context
        saved = (self.env, self.params)
        self.env = {k: v for k, v in self.env.items() if k not in shadow}
        self.params = self.params - shadow
        inner = FunctionWalker(self.m, self.params, self.self_param, self.env, self.shadowed | shadow)
        inner.not_own = self.not_own - shadow
        inner.calls = self.calls
        inner.locals = self.locals
        if isinstance(body, list):
            inner.body(body)
        else:
            inner.expr(body)
        self.env, self.params = saved

    def bind(self, target: ast.expr, value: Expr, line: int) -> None:
        match target:
            case ast.Name(id=name):
                self.locals.append(prune(value))
                self.env[name] = (Local(len(self.locals) - 1), line)
            case ast.Tuple(elts=elements) | ast.List(elts=elements):
                for element in elements:
                    self.bind(element.value if isinstance(element, ast.Starred) else element, UNKNOWN, line)
            case ast.Subscript(value=base, slice=key):
                self.expr(key)
                current = (
                    self.deref(self.env[base.id][0])
                    if isinstance(base, ast.Name) and base.id in self.env
                    else None
                )
                if (
                    isinstance(current, DictOf)
                    and isinstance(key, ast.Constant)
                    and isinstance(key.value, str)
                ):
                    items = tuple(kv for kv in current.items if kv[0] != key.value)
                    self.bind(base, DictOf((*items, (key.value, value))), line)
                else:
                    self.expr(base)
            case ast.Attribute(value=ast.Name(id=owner), attr=attr) if owner == self.self_param:
                binding = Binding(attr, inline(prune(value), self.locals), line)
                self.m.instance_attrs.setdefault(attr, []).append(binding)
            case ast.Attribute(value=base):
                self.expr(base)
            case ast.Starred(value=inner):
                self.bind(inner, UNKNOWN, line)

    def deref(self, expr: Expr) -> Expr:
        while isinstance(expr, Local):
            expr = self.locals[expr.index]
        return expr

    # expressions ----------------------------------------------------------------------
    def name(self, ident: str) -> Expr:
        if ident in self.env:
            value, line = self.env[ident]
            self._aliases.append((ident, line))
            return value
        if ident == self.self_param:
            return SELF
        if ident in self.params:
            return Param(ident)
        if ident in self.shadowed:
            return UNKNOWN
        return Name(ident)

    def expr(self, node: ast.expr, in_with: bool = False) -> Expr:
        kind = type(node)  # the four most frequent kinds first, without trying each pattern
        if kind is ast.Name:
            return self.name(node.id)  # type: ignore[attr-defined]
        if kind is ast.Attribute:
            return Attr(self.expr(node.value), node.attr)  # type: ignore[attr-defined]
        if kind is ast.Call:
            return self.call(node, in_with)  # type: ignore[arg-type]
        if kind is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is str:
                return Str(value)
            return Const(repr(value)) if value is None or type(value) in _SCALARS else UNKNOWN
        if kind in _OPAQUE:  # `x[i]`, `a < b`, `-x`, `*x`, `{a, b}`: only their calls matter
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
            return UNKNOWN
        match node:
            case ast.Subscript(value=value, slice=ast.Constant(value=str() as key)):  # `ROUTES["answer"]`
                return Item(self.expr(value), key)
            case ast.Subscript(value=value, slice=key):
                self.expr(value)
                self.expr(key)
                return UNKNOWN
            case ast.Await(value=value):
                return self.expr(value, in_with)
            case ast.JoinedStr(values=values):
                return Join(tuple(self._formatted(value) for value in values))
            case ast.BinOp(left=left, op=op, right=right):
                left_value, right_value = self.expr(left), self.expr(right)
                if isinstance(op, ast.Add):
                    return Join((left_value, right_value))
                if isinstance(op, ast.Mod) and isinstance(left_value, Str):
                    return percent_format(left_value.text, self.deref(right_value))
                if isinstance(op, ast.Div) and isinstance(self.deref(left_value), Call):
                    # `PurePosixPath("/v1") / "responses"`: the path object joined, if it is one
                    return Call(Attr(left_value, "joinpath"), (right_value,), ())
                return UNKNOWN
            case ast.List(elts=elements) | ast.Tuple(elts=elements):
                values = tuple(self.expr(element) for element in elements)
                if any(isinstance(e, ast.Starred) for e in elements):
                    return UNKNOWN
                if len(values) > LIMITS.sequence_items:
                    return Unknown("sequence_items")  # a data table, not path segments
                return Seq(values)
            case ast.Dict(keys=keys, values=values):
                items = []
                for key, value in zip(keys, values):
                    value_expr = self.expr(value)
                    if key is None:
                        items.append((None, value_expr))
                    elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                        items.append((key.value, value_expr))
                    else:
                        self.expr(key)
                return DictOf(tuple(items))
            case ast.IfExp(test=test, body=body, orelse=orelse):
                self.expr(test)
                return merge([self.expr(body), self.expr(orelse)])
            case ast.BoolOp(op=op, values=values):
                found = [self.expr(v) for v in values]
                return Or(tuple(found)) if isinstance(op, ast.Or) else UNKNOWN
            case ast.NamedExpr(target=target, value=value):
                bound = self.expr(value)
                self.bind(target, bound, node.lineno)
                return bound
            case ast.Lambda(args=args, body=body):
                self.nested_function(args, body)
                return UNKNOWN
            case ast.ListComp() | ast.SetComp() | ast.GeneratorExp() | ast.DictComp():
                self._comprehension(node)
                return UNKNOWN
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
        return UNKNOWN

    def _formatted(self, value: ast.expr) -> Expr:
        if not isinstance(value, ast.FormattedValue):
            return self.expr(value)
        inner = self.expr(value.value)
        if value.format_spec is not None:
            self.expr(value.format_spec)
        if value.conversion not in (-1, 115) or value.format_spec is not None:
            return UNKNOWN
        label = field_label(value.value)
        return Named(label, inner) if label and type(inner) is not Str else inner

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        saved_env = self.env
        self.env = dict(self.env)
        for generator in node.generators:
            self.expr(generator.iter)
            self.bind(generator.target, UNKNOWN, node.lineno)
            for condition in generator.ifs:
                self.expr(condition)
        if isinstance(node, ast.DictComp):
            self.expr(node.key)
            self.expr(node.value)
        else:
            self.expr(node.elt)
        self.env = saved_env

    def call(self, node: ast.Call, in_with: bool) -> Expr:
        outer_aliases = self._aliases
        self._aliases = []
        func = self.expr(node.func)
        callee = self.deref(func)  # `post = self.server_client.post; post(...)`
        client = isinstance(callee, Attr) and callee.attr in CLIENT_METHODS
        feeds: list[tuple[str, int, str]] = [(name, line, "receiver") for name, line in self._aliases]
        args: list[Expr] = []
        for number, arg in enumerate(node.args):
            seen = len(self._aliases)
            if isinstance(arg, ast.Starred):
                self.expr(arg.value)
                args.append(UNKNOWN)
            else:
                args.append(self.expr(arg))
            if len(self._aliases) > seen:
                feeds += [(name, line, f"#{number}") for name, line in self._aliases[seen:]]
        kwargs_list = []
        for kw in node.keywords:
            seen = len(self._aliases)
            kwargs_list.append((kw.arg, self.expr(kw.value)))
            if client and kw.arg is not None and kw.arg not in ROUTING_KWARGS:
                del self._aliases[seen:]  # `json=body`: says nothing about where the call goes
            if len(self._aliases) > seen:
                feeds += [(name, line, kw.arg or "**") for name, line in self._aliases[seen:]]
        kwargs = tuple(kwargs_list)
        self._aliases = outer_aliases + self._aliases

        built = built_value(func, args, kwargs, self.deref)
        if built is not None:
            return built
        if worth_recording(callee, args, kwargs):
            context = "with" if in_with else self.context
            fact = call_fact(node, self.m.position, func, args, kwargs, client, feeds, context)
            self.calls.append(fact._replace(not_own=tuple(sorted(self.not_own))) if self.not_own else fact)
        return Call(func, tuple(args), kwargs)


def param_names(args: ast.arguments) -> set[str]:
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return names


def _dotted_tail(expr: Expr) -> str | None:
    """The last name of a callee written as a name or an attribute (`functools.wraps`: `wraps`)."""
    return expr.attr if isinstance(expr, Attr) else expr.name if isinstance(expr, Name) else None
