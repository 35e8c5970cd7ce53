"""Per-file facts: what one module says about classes, constants and calls, as pure data.

Expressions are kept in a small symbolic form (nested tuples), with each function's local
bindings already substituted, so that resolution across modules never needs the syntax tree:

    ("s", text)                 string literal
    ("j", (part, ...))          concatenation: f-strings and `+`
    ("n", name)                 a free name: module global, import or builtin
    ("p", name)                 a parameter of the enclosing function
    ("self",)                   the method's `self`
    ("a", base, attr)           attribute access (`getattr(x, "attr")` too)
    ("c", func, args, kwargs)   a call; kwargs are (name, expr) pairs, name None for `**expr`
    ("d", ((key, expr), ...))   a dict built in the function; key None for `**expr`
    ("or", (expr, ...))         one of several values (branches, rebinding)
    ("l", index)                the value bound to a local variable: `FunctionFacts.locals[index]`
    ("k", repr)                 another constant (number, None, bool)
    ("?",)                      unknown
"""

from __future__ import annotations

import ast
import re
import string
import warnings
from collections.abc import Callable
from dataclasses import dataclass

Expr = tuple
UNKNOWN: Expr = ("?",)
SELF: Expr = ("self",)

CLIENT_METHODS = frozenset({"post", "get", "request", "put", "patch", "delete"})
ROUTE_METHODS = frozenset({"post", "get", "put", "patch", "delete", "api_route", "add_api_route", "route"})
_NOT_HELPERS = frozenset(
    {
        "len",
        "isinstance",
        "issubclass",
        "print",
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "repr",
        "range",
        "enumerate",
        "zip",
        "sorted",
        "min",
        "max",
        "sum",
        "any",
        "all",
        "hasattr",
        "type",
        "iter",
        "next",
    }
)
_MAX_ALTERNATIVES = 8
_MAX_DEPTH = 8
_MAX_INLINED_DEPTH = 4 * _MAX_DEPTH
# Keyword arguments of a client call that resolution reads; the rest (json=, cookies=...) are dropped.
_ROUTING_KWARGS = frozenset({"server_name", "url_path", "method"})
_NOQA = re.compile(rb"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


@dataclass(frozen=True)
class Import:
    local: str
    module: str
    name: str | None  # None: the binding is the module itself (`import a.b as c`)
    level: int
    line: int


@dataclass(frozen=True)
class Binding:
    name: str
    expr: Expr
    line: int


@dataclass(frozen=True)
class CallFact:
    line: int
    col: int
    end_line: int
    end_col: int
    func: Expr
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str | None, Expr], ...]
    aliases: tuple[tuple[str, int], ...]  # local bindings the call went through, with their lines
    in_with: bool = False  # used as a (async) context manager


@dataclass(frozen=True)
class FunctionFacts:
    name: str
    line: int
    params: tuple[str, ...]
    defaults: tuple[tuple[str, Expr], ...]
    self_param: str | None
    calls: tuple[CallFact, ...]
    locals: tuple[Expr, ...] = ()  # values of local bindings, referred to as ("l", index)
    returns: Expr = UNKNOWN  # what the function returns: one value or alternatives ("or")


@dataclass(frozen=True)
class ClassFacts:
    name: str
    line: int
    bases: tuple[Expr, ...]
    constants: tuple[Binding, ...]
    instance_attrs: tuple[Binding, ...]
    methods: tuple[FunctionFacts, ...]


@dataclass(frozen=True)
class ModuleFacts:
    path: str
    imports: tuple[Import, ...]
    constants: tuple[Binding, ...]
    classes: tuple[ClassFacts, ...]
    functions: tuple[FunctionFacts, ...]
    served: tuple[str, ...]  # classes started by `X.run_webserver()` under `if __name__ == "__main__"`
    noqa: tuple[tuple[int, tuple[str, ...] | None], ...]


class FactsError(Exception):
    """The file cannot be turned into facts (syntax error, nesting too deep)."""


_LEAVES = frozenset({"s", "n", "p", "k", "?", "self", "l", "g"})


def map_children(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """The same expression with `fn` applied to each sub-expression; leaves stay as they are."""
    kind = expr[0]
    if kind in _LEAVES:
        return expr
    if kind == "a":
        return ("a", fn(expr[1]), expr[2])
    if kind == "c":
        return ("c", fn(expr[1]), tuple(map(fn, expr[2])), tuple((k, fn(v)) for k, v in expr[3]))
    if kind == "d":
        return ("d", tuple((k, fn(v)) for k, v in expr[1]))
    return (kind, tuple(map(fn, expr[1])))


def inline(expr: Expr, table: tuple[Expr, ...] | list[Expr]) -> Expr:
    """Replace ("l", index) references by the bound values (shared, so memory stays linear).

    The result is cut at `_MAX_INLINED_DEPTH`: a function rebinding one local hundreds of times
    (`url += ...`) must not nest deeper than the recursion that later reads it can go.
    """
    memo: dict[tuple[int, int], Expr] = {}

    def walk(node: Expr, depth: int) -> Expr:
        if depth > _MAX_INLINED_DEPTH:
            return UNKNOWN
        kind = node[0]
        if kind == "l":
            key = (node[1], depth)
            if key not in memo:
                memo[key] = walk(table[node[1]], depth)
            return memo[key]
        return map_children(node, lambda child: walk(child, depth + 1))

    return walk(expr, 0)


def _merge(values: list[Expr]) -> Expr:
    unique: list[Expr] = []
    for value in values:
        for alt in value[1] if value[0] == "or" else (value,):
            if alt not in unique:
                unique.append(alt)
    if len(unique) == 1:
        return unique[0]
    if len(unique) > _MAX_ALTERNATIVES:
        return UNKNOWN
    return ("or", tuple(unique))


def _prune(expr: Expr, depth: int = 0) -> Expr:
    """Cut what lies deeper than any name or route expression resolution follows."""
    if depth >= _MAX_DEPTH:
        return UNKNOWN
    return map_children(expr, lambda child: _prune(child, depth + 1))


Env = dict[str, tuple[Expr, int]]


class _FunctionWalker:
    """Walks one function body in order, tracking local bindings, and records its calls."""

    def __init__(
        self,
        facts: _ModuleExtractor,
        params: set[str],
        self_param: str | None,
        env: Env,
        shadowed: frozenset[str] = frozenset(),
    ):
        self.m = facts
        self.params = params
        self.self_param = self_param
        self.env = env
        self.shadowed = shadowed
        self.locals: list[Expr] = []
        self.calls: list[CallFact] = []
        self.returns: list[Expr] = []
        self._aliases: list[tuple[str, int]] = []

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
                merged[name] = (_merge([value for value, _ in seen]), seen[-1][1])
        self.env = merged

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            value = self.expr(node.value)
            for target in node.targets:
                self.bind(target, value, node.lineno)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.expr(node.value), node.lineno)
        elif isinstance(node, ast.AugAssign):
            value = self.expr(node.value)
            if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
                old = self.expr(node.target)
                self.bind(node.target, ("j", (old, value)), node.lineno)
            else:
                self.bind(node.target, UNKNOWN, node.lineno)
        elif isinstance(node, ast.If):
            self.expr(node.test)
            self._branches([node.body, node.orelse], keep_base=False)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter)
            self.bind(node.target, UNKNOWN, node.lineno)
            self._branches([node.body], keep_base=True)
            self.body(node.orelse)
        elif isinstance(node, ast.While):
            self.expr(node.test)
            self._branches([node.body], keep_base=True)
            self.body(node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.body(node.body)
            self._branches([h.body for h in node.handlers] + [node.orelse], keep_base=True)
            self.body(node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                value = self.expr(item.context_expr, in_with=True)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, value, node.lineno)
            self.body(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                self.expr(decorator)
            self.nested_function(node.args, node.body)
            self.env[node.name] = (UNKNOWN, node.lineno)
        elif isinstance(node, ast.ClassDef):
            self.m.nested_class(node)  # a class built by a factory function is a class all the same
            self.env[node.name] = (UNKNOWN, node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.m.imports_from(node)
            for alias in node.names:
                self.env.pop((alias.asname or alias.name).split(".")[0], None)
        elif isinstance(node, ast.Match):
            self.expr(node.subject)
            self._branches([case.body for case in node.cases], keep_base=True)
        elif isinstance(node, ast.Return):
            self.returns.append(self.expr(node.value) if node.value is not None else ("k", "None"))
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.env.pop(target.id, None)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.stmt):
                    self.stmt(child)

    def nested_function(self, args: ast.arguments, body: list[ast.stmt] | ast.expr) -> None:
        """Closures see the enclosing bindings; their calls belong to the enclosing function."""
        shadow = frozenset(_param_names(args))
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.expr(default)
        saved = (self.env, self.params)
        self.env = {k: v for k, v in self.env.items() if k not in shadow}
        self.params = self.params - shadow
        inner = _FunctionWalker(self.m, self.params, self.self_param, self.env, self.shadowed | shadow)
        inner.calls = self.calls
        inner.locals = self.locals
        if isinstance(body, list):
            inner.body(body)
        else:
            inner.expr(body)
        self.env, self.params = saved

    def bind(self, target: ast.expr, value: Expr, line: int) -> None:
        if isinstance(target, ast.Name):
            self.locals.append(_prune(value))
            self.env[target.id] = (("l", len(self.locals) - 1), line)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element.value if isinstance(element, ast.Starred) else element, UNKNOWN, line)
        elif isinstance(target, ast.Subscript):
            self.expr(target.slice)
            base = target.value
            current = (
                self.deref(self.env[base.id][0])
                if isinstance(base, ast.Name) and base.id in self.env
                else None
            )
            if (
                current is not None
                and current[0] == "d"
                and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str)
            ):
                items = tuple(kv for kv in current[1] if kv[0] != target.slice.value)
                self.bind(base, ("d", (*items, (target.slice.value, value))), line)
            else:
                self.expr(base)
        elif isinstance(target, ast.Attribute):
            if isinstance(target.value, ast.Name) and target.value.id == self.self_param:
                binding = Binding(target.attr, inline(_prune(value), self.locals), line)
                self.m.instance_attrs.setdefault(target.attr, []).append(binding)
            else:
                self.expr(target.value)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, UNKNOWN, line)

    def deref(self, expr: Expr) -> Expr:
        while expr[0] == "l":
            expr = self.locals[expr[1]]
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
            return ("p", ident)
        if ident in self.shadowed:
            return UNKNOWN
        return ("n", ident)

    def expr(self, node: ast.expr, in_with: bool = False) -> Expr:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return ("s", node.value)
            if node.value is None or isinstance(node.value, (bool, int, float)):
                return ("k", repr(node.value))
            return UNKNOWN
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            return ("a", self.expr(node.value), node.attr)
        if isinstance(node, ast.Call):
            return self.call(node, in_with)
        if isinstance(node, ast.Await):
            return self.expr(node.value, in_with)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    inner = self.expr(value.value)
                    if value.format_spec is not None:
                        self.expr(value.format_spec)
                    parts.append(inner if value.conversion in (-1, 115) else UNKNOWN)
                else:
                    parts.append(self.expr(value))
            return ("j", tuple(parts))
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(node.op, ast.Add):
                return ("j", (left, right))
            if isinstance(node.op, ast.Mod) and left[0] == "s":
                return _percent_format(left[1], right)
            return UNKNOWN
        if isinstance(node, (ast.List, ast.Tuple)):
            if any(isinstance(element, ast.Starred) for element in node.elts):
                for element in node.elts:
                    self.expr(element)
                return UNKNOWN
            return ("t", tuple(self.expr(element) for element in node.elts))
        if isinstance(node, ast.Dict):
            items = []
            for key, value in zip(node.keys, node.values):
                value_expr = self.expr(value)
                if key is None:
                    items.append((None, value_expr))
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    items.append((key.value, value_expr))
                else:
                    self.expr(key)
            return ("d", tuple(items))
        if isinstance(
            node, (ast.Subscript, ast.Compare, ast.UnaryOp, ast.Starred, ast.Set)
        ):
            for child in _CHILDREN[type(node)](node):
                self.expr(child)
            return UNKNOWN
        if isinstance(node, ast.IfExp):
            self.expr(node.test)
            return _merge([self.expr(node.body), self.expr(node.orelse)])
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v) for v in node.values]
            return _merge(values) if isinstance(node.op, ast.Or) else UNKNOWN
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value)
            self.bind(node.target, value, node.lineno)
            return value
        if isinstance(node, ast.Lambda):
            self.nested_function(node.args, node.body)
            return UNKNOWN
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
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
            return UNKNOWN
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
        return UNKNOWN

    def call(self, node: ast.Call, in_with: bool) -> Expr:
        outer_aliases = self._aliases
        self._aliases = []
        func = self.expr(node.func)
        callee = self.deref(func)  # `post = self.server_client.post; post(...)`
        client = callee[0] == "a" and callee[2] in CLIENT_METHODS
        args: list[Expr] = []
        for arg in node.args:
            args.append(UNKNOWN if isinstance(arg, ast.Starred) else self.expr(arg))
            if isinstance(arg, ast.Starred):
                self.expr(arg.value)
        kwargs_list = []
        for kw in node.keywords:
            seen = len(self._aliases)
            kwargs_list.append((kw.arg, self.expr(kw.value)))
            if client and kw.arg is not None and kw.arg not in _ROUTING_KWARGS:
                del self._aliases[seen:]  # `json=body`: says nothing about where the call goes
        kwargs = tuple(kwargs_list)
        aliases = tuple(dict.fromkeys(self._aliases))
        self._aliases = outer_aliases + self._aliases

        if func == ("n", "getattr") and len(args) == 2 and args[1][0] == "s":
            return ("a", args[0], args[1][1])
        if func == ("n", "dict") and not args:
            return ("d", kwargs)
        if func[0] == "a" and func[1][0] == "s":
            if func[2] == "format":
                return _str_format(func[1][1], args, kwargs)
            if func[2] == "join" and len(args) == 1 and not kwargs:
                return _str_join(func[1][1], args[0])
        if _worth_recording(callee, args, kwargs):
            line, col = self.m.position(node.lineno, node.col_offset)
            end_line, end_col = self.m.position(node.end_lineno or node.lineno, node.end_col_offset or 0)
            recorded_kwargs = tuple(
                (k, _prune(v) if not client or k is None or k in _ROUTING_KWARGS else UNKNOWN)
                for k, v in kwargs
            )
            self.calls.append(
                CallFact(
                    line,
                    col,
                    end_line,
                    end_col,
                    _prune(func),
                    tuple(_prune(a) for a in args),
                    recorded_kwargs,
                    aliases,
                    in_with,
                )
            )
        return ("c", func, tuple(args), kwargs)


_PERCENT_FIELD = re.compile(r"%(?:\((\w+)\))?[-#0 +]*(?:\d+)?(?:\.\d+)?([a-zA-Z%])")


def _percent_format(template: str, values: Expr) -> Expr:
    """`"/v1/%s" % x` as a concatenation: `%s` fields take the values in order (or by key from a
    dict); other conversions (`%d`, `%r`, ...) are unknown parts."""
    positional = list(values[1]) if values[0] == "t" else [values]
    by_key = dict(item for item in values[1] if item[0] is not None) if values[0] == "d" else {}
    parts: list[Expr] = []
    position = 0
    for match in _PERCENT_FIELD.finditer(template):
        parts.append(("s", template[position : match.start()]))
        position = match.end()
        key, conversion = match.groups()
        if conversion == "%":
            parts.append(("s", "%"))
            continue
        value = by_key.get(key, UNKNOWN) if key else (positional.pop(0) if positional else UNKNOWN)
        parts.append(value if conversion == "s" else UNKNOWN)
    parts.append(("s", template[position:]))
    return ("j", tuple(parts))


def _str_format(template: str, args: list[Expr], kwargs: tuple[tuple[str | None, Expr], ...]) -> Expr:
    """`"/v1/{}".format(x)` as a concatenation; fields with a format spec, a conversion or an
    attribute/index lookup are unknown parts."""
    named = {key: value for key, value in kwargs if key is not None}
    parts: list[Expr] = []
    auto = 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return UNKNOWN
    for literal, field_name, spec, conversion in fields:
        parts.append(("s", literal))
        if field_name is None:
            continue
        if field_name == "":
            field_name, auto = str(auto), auto + 1
        if field_name.isdigit():
            value = args[int(field_name)] if int(field_name) < len(args) else UNKNOWN
        else:
            value = named.get(field_name, UNKNOWN)
        parts.append(UNKNOWN if spec or conversion not in (None, "s") else value)
    return ("j", tuple(parts))


def _str_join(separator: str, items: Expr) -> Expr:
    """`"/".join(["", "v1", x])` as a concatenation, for a list or tuple written in place."""
    if items[0] != "t":
        return UNKNOWN
    parts: list[Expr] = []
    for number, item in enumerate(items[1]):
        if number:
            parts.append(("s", separator))
        parts.append(item)
    return ("j", tuple(parts)) if parts else ("s", "")


_CHILDREN = {
    ast.Subscript: lambda n: (n.value, n.slice),
    ast.Compare: lambda n: (n.left, *n.comparators),
    ast.UnaryOp: lambda n: (n.operand,),
    ast.Starred: lambda n: (n.value,),
    ast.Set: lambda n: n.elts,
}


def _worth_recording(func: Expr, args: list[Expr], kwargs: tuple) -> bool:
    """Calls resolution can use: client methods, route registration, and possible helpers
    (methods on `self` or `super()`, functions by name or through a module, calls of partials
    or parameters). Methods of arbitrary objects can do neither."""
    kind = func[0]
    if kind == "a":
        base = func[1]
        return (
            func[2] in CLIENT_METHODS
            or func[2] in ROUTE_METHODS
            or base == SELF
            or base[0] == "n"
            or base[:2] == ("c", ("n", "super"))
        )
    if kind == "n":
        return func[1] not in _NOT_HELPERS and bool(args or kwargs)
    if kind == "or":  # `send = self._post if flag else self._send; send(...)`
        return any(_worth_recording(alternative, args, kwargs) for alternative in func[1])
    return kind in ("c", "p")


def _param_names(args: ast.arguments) -> set[str]:
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return names


class _ModuleExtractor:
    def __init__(self, path: str, source: bytes):
        self.path = path
        self.source = source
        self._lines: list[bytes] | None = None
        self.imports: list[Import] = []
        self.instance_attrs: dict[str, list[Binding]] = {}
        self.nested: list[ClassFacts] = []

    def nested_class(self, node: ast.ClassDef) -> None:
        saved = self.instance_attrs
        self.nested.append(self.klass(node))
        self.instance_attrs = saved

    def position(self, line: int, byte_col: int) -> tuple[int, int]:
        """1-based line and 1-based character column from ast's UTF-8 byte offset."""
        if self._lines is None:
            self._lines = self.source.splitlines()
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else b""
        prefix = text[:byte_col]
        return line, (len(prefix.decode("utf-8", "replace")) if not prefix.isascii() else byte_col) + 1

    def imports_from(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports.append(Import(alias.asname, alias.name, None, 0, node.lineno))
                else:
                    top = alias.name.split(".")[0]
                    self.imports.append(Import(top, top, None, 0, node.lineno))
        else:
            for alias in node.names:
                if alias.name != "*":
                    local = alias.asname or alias.name
                    self.imports.append(Import(local, node.module or "", alias.name, node.level, node.lineno))

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> FunctionFacts:
        params = _param_names(node.args)
        positional = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
        is_static = any(
            isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in node.decorator_list
        )
        self_param = positional[0] if is_method and positional and not is_static else None
        walker = _FunctionWalker(self, params - {self_param} if self_param else params, self_param, {})
        defaults = []
        all_defaults = list(node.args.defaults)
        for param, default in zip(positional[len(positional) - len(all_defaults) :], all_defaults):
            defaults.append((param, walker.expr(default)))
        for param, default in zip(node.args.kwonlyargs, node.args.kw_defaults):
            if default is not None:
                defaults.append((param.arg, walker.expr(default)))
        walker.calls = []
        walker.body(node.body)
        ordered = tuple(positional + [a.arg for a in node.args.kwonlyargs])
        return FunctionFacts(
            node.name,
            node.lineno,
            ordered,
            tuple(defaults),
            self_param,
            tuple(walker.calls),
            tuple(walker.locals),
            _prune(_merge(walker.returns)) if walker.returns else UNKNOWN,
        )

    def constants(self, stmts: list[ast.stmt]) -> list[Binding]:
        """Top-level `NAME = expr` bindings; names bound in several places become alternatives."""
        walker = _FunctionWalker(self, set(), None, {})
        found: dict[str, list[Binding]] = {}
        pending = list(stmts)
        while pending:
            stmt = pending.pop(0)
            targets: list[ast.expr] = []
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets = [stmt.target]
            elif isinstance(stmt, (ast.If, ast.Try)):
                pending[:0] = [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "handlers", [])]
                continue
            elif isinstance(stmt, ast.ExceptHandler):
                pending[:0] = stmt.body
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    value = _prune(walker.expr(stmt.value))  # type: ignore[union-attr]
                    found.setdefault(target.id, []).append(Binding(target.id, value, stmt.lineno))
        return [
            Binding(name, _merge([b.expr for b in bindings]), bindings[0].line)
            for name, bindings in found.items()
        ]

    def klass(self, node: ast.ClassDef) -> ClassFacts:
        outer = _FunctionWalker(self, set(), None, {})
        bases = tuple(outer.expr(base) for base in node.bases)
        self.instance_attrs = instance_attrs = {}
        methods = []
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.append(self.function(stmt, is_method=True))
        attrs = tuple(
            Binding(name, _merge([b.expr for b in bindings]), bindings[0].line)
            for name, bindings in instance_attrs.items()
        )
        return ClassFacts(
            node.name, node.lineno, bases, tuple(self.constants(node.body)), attrs, tuple(methods)
        )

    def module(self, tree: ast.Module) -> ModuleFacts:
        classes: list[ClassFacts] = []
        functions: list[FunctionFacts] = []
        served: list[str] = []
        pending = list(tree.body)
        while pending:
            stmt = pending.pop(0)
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.imports_from(stmt)
            elif isinstance(stmt, ast.ClassDef):
                classes.append(self.klass(stmt))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(self.function(stmt, is_method=False))
            elif isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
                served.extend(_served_classes(stmt.body))
            elif isinstance(stmt, (ast.If, ast.Try)):
                pending[:0] = [
                    *stmt.body,
                    *stmt.orelse,
                    *(s for h in getattr(stmt, "handlers", []) for s in h.body),
                ]
        return ModuleFacts(
            path=self.path,
            imports=tuple(self.imports),
            constants=tuple(self.constants(tree.body)),
            classes=tuple(classes + self.nested),
            functions=tuple(functions),
            served=tuple(served),
            noqa=_noqa_lines(self.source),
        )


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _served_classes(body: list[ast.stmt]) -> list[str]:
    served = []
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run_webserver"
            and isinstance(node.func.value, ast.Name)
        ):
            served.append(node.func.value.id)
    return served


def _noqa_lines(source: bytes) -> tuple[tuple[int, tuple[str, ...] | None], ...]:
    found = []
    for match in _NOQA.finditer(source):
        line = source.count(b"\n", 0, match.start()) + 1
        codes = match.group("codes")
        parsed = tuple(c.upper() for c in re.split(r"[,\s]+", codes.decode()) if c) if codes else None
        found.append((line, parsed))
    return tuple(found)


def extract(path: str, source: bytes) -> ModuleFacts:
    """Facts of one Python file. Raises FactsError, with a message for the SCA900 entry, for input
    that cannot be analysed; never anything else, so one odd file cannot stop a scan."""
    if b"\0" in source:
        raise FactsError("binary file: it contains null bytes, so it is not Python source")
    try:
        with warnings.catch_warnings():  # `"\d"` and the like: the audited code's business, not our output
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path, type_comments=False)
    except SyntaxError as exc:
        raise FactsError(_syntax_error_message(exc)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise FactsError(f"cannot parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise FactsError("too deeply nested to parse") from None
    try:
        return _ModuleExtractor(path, source).module(tree)
    except (RecursionError, MemoryError):
        raise FactsError("too deeply nested to analyse") from None
    except Exception as exc:  # a bug of ours: this file is reported, the others are still analysed
        raise FactsError(
            f"internal error while analysing ({type(exc).__name__}: {exc}); please report it"
        ) from exc


def _syntax_error_message(exc: SyntaxError) -> str:
    where = f" at line {exc.lineno}" if exc.lineno and exc.lineno > 0 else ""
    if where and exc.offset and exc.offset > 0:
        where += f", column {exc.offset}"
    message = exc.msg
    if message.startswith(("too many nested parentheses", "too many levels of indentation")):
        return f"too deeply nested to parse{where}: {message}"
    if message.startswith(("unknown encoding", "encoding problem")) or (
        message.startswith("(unicode error)") and "can't decode byte" in message
    ):
        return f"cannot decode the source{where}: {message.removeprefix('(unicode error) ')}"
    return f"syntax error{where}: {message}"
