"""Which calls the facts keep, and what a kept call holds: where it is, its callee and arguments
as expressions, the local bindings it went through and its arguments as written."""

import ast
from collections.abc import Callable
from typing import NamedTuple

from .expr import SELF, UNKNOWN, Alt, Attr, Call, Expr, Name, Param, SelfRef, prune

# The server client's methods, each with its positional parameters in order: the one table the
# analysis (where a call goes) and the rewrite policy (what each argument becomes) both read.
CLIENT_SIGNATURES: dict[str, tuple[str, ...]] = {
    "post": ("server_name", "url_path"),
    "get": ("server_name", "url_path"),
    "put": ("server_name", "url_path"),
    "patch": ("server_name", "url_path"),
    "delete": ("server_name", "url_path"),
    "request": ("server_name", "url_path", "method"),
}
CLIENT_METHODS = frozenset(CLIENT_SIGNATURES)
ROUTE_METHODS = frozenset({"post", "get", "put", "patch", "delete", "api_route", "add_api_route", "route"})
# Keyword arguments of a client call that resolution reads; the rest (json=, cookies=...) are dropped.
ROUTING_KWARGS = frozenset({"server_name", "url_path", "method"})
_OWN_NAME = Attr(Attr(SELF, "config"), "name")
_NOT_HELPERS = frozenset(
    [
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
    ]
)


class CallFact(NamedTuple):
    line: int
    col: int
    end_line: int
    end_col: int
    func: Expr
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str | None, Expr], ...]
    # local bindings the call went through: name, line, and the part of the call that reads it
    # ("receiver", a keyword, or "#<n>" for the n-th positional argument)
    aliases: tuple[tuple[str, int, str], ...]
    # the arguments as written, in source order: (keyword or None, "" / "*" / "**", the keys a `**`
    # expansion passes when it is a dict display or a conditional between them, else None)
    written: tuple[tuple[str | None, str, tuple[str, ...] | None], ...] = ()
    callee: str | None = None  # the callee as written when it is a dotted name: `self.server_client.post`
    context: str = "expression"  # "with": an (async) context manager; "default" / "decorator" of a def
    # for a client call, each argument as written that can say where it goes (positional, server_name,
    # url_path, method), as `ast.unparse` gives it; "" for the others
    texts: tuple[str, ...] = ()
    not_own: tuple[str, ...] = ()  # parameters a test before the call showed not to be the own name


def worth_recording(func: Expr, args: list[Expr], kwargs: tuple) -> bool:
    """Calls resolution can use: client methods, route registration, and possible helpers
    (methods on `self` or `super()`, functions by name or through a module, calls of partials
    or parameters, methods of an object stored on `self` or built in place). Methods of other
    objects can do neither."""
    match func:
        case Attr(base, attr):
            return (
                attr in CLIENT_METHODS
                or attr in ROUTE_METHODS
                or isinstance(base, (SelfRef, Name, Call))
                or (isinstance(base, Attr) and isinstance(base.base, SelfRef))
            )
        case Name(name):
            return name not in _NOT_HELPERS and bool(args or kwargs)
        case Alt(options):  # `send = self._post if flag else self._send; send(...)`
            return any(worth_recording(option, args, kwargs) for option in options)
    return isinstance(func, (Call, Param))


def call_fact(
    node: ast.Call,
    position: Callable[[int, int], tuple[int, int]],
    func: Expr,
    args: list[Expr],
    kwargs: tuple[tuple[str | None, Expr], ...],
    client: bool,
    feeds: list[tuple[str, int, str]],
    context: str,
) -> CallFact:
    """The fact of a call: `position` turns ast's line and byte offset into line and column; a
    client call keeps only the keyword arguments that say where it goes."""
    line, col = position(node.lineno, node.col_offset)
    end_line, end_col = position(node.end_lineno or node.lineno, node.end_col_offset or 0)
    recorded_kwargs = tuple(
        (k, prune(v) if not client or k is None or k in ROUTING_KWARGS else UNKNOWN) for k, v in kwargs
    )
    written = [
        (a.lineno, a.col_offset, None, "*" if isinstance(a, ast.Starred) else "", None, _text(a, client))
        for a in node.args
    ]
    written += [
        (
            kw.lineno,
            kw.col_offset,
            kw.arg,
            "" if kw.arg else "**",
            None if kw.arg else expanded_keys(kw.value),
            _text(kw.value, client and kw.arg in ROUTING_KWARGS),
        )
        for kw in node.keywords
    ]
    if node.args and node.keywords:
        written.sort(key=lambda item: (item[0], item[1]))  # `f(a=1, *rest)` is source order too
    return CallFact(
        line,
        col,
        end_line,
        end_col,
        prune(func),
        tuple(map(prune, args)),
        recorded_kwargs,
        tuple(dict.fromkeys(feeds)),
        tuple((keyword, star, keys) for _, _, keyword, star, keys, _ in written),
        dotted_source(node.func),
        context,
        tuple(text for *_, text in written),
    )


def own_name_test(test: ast.expr, value: Callable[[ast.expr], Expr]) -> tuple[str | None, bool]:
    """`param == self.config.name` (or `!=`, `is`, either side): the parameter, and whether the
    test is for equality; a call that the test keeps from the agent's own name records it as
    `not_own`. `value` turns a side into an expression (walked once: a name or an attribute)."""
    match test:
        case ast.Compare(
            left=ast.Name() | ast.Attribute() as left,
            ops=[ast.Eq() | ast.Is() | ast.NotEq() | ast.IsNot() as op],
            comparators=[ast.Name() | ast.Attribute() as right],
        ):
            sides = [value(left), value(right)]
            if _OWN_NAME in sides:
                other = sides[1 - sides.index(_OWN_NAME)]
                if isinstance(other, Param):
                    return other.name, isinstance(op, (ast.Eq, ast.Is))
    return None, False


def _text(node: ast.expr, routing: bool) -> str:
    """An argument that says where a client call goes, as Python reads it (`fix` checks that the
    call it rewrites still says the same); "" for the others."""
    return ast.unparse(node) if routing and not isinstance(node, ast.Starred) else ""


def expanded_keys(node: ast.expr) -> tuple[str, ...] | None:
    """The keyword names `**node` passes, when the code shows them all: a dict display with string
    keys (`{"headers": h}`), or a conditional between such displays (`{"headers": h} if h else {}`),
    whose keys are those of either branch; None otherwise."""
    if isinstance(node, ast.IfExp):
        body, orelse = expanded_keys(node.body), expanded_keys(node.orelse)
        return None if body is None or orelse is None else tuple(dict.fromkeys(body + orelse))
    if isinstance(node, ast.Dict) and all(
        isinstance(key, ast.Constant) and isinstance(key.value, str) for key in node.keys
    ):
        return tuple(dict.fromkeys(key.value for key in node.keys))  # type: ignore[union-attr]
    return None


def dotted_source(node: ast.expr) -> str | None:
    """`a.b.c` as written, or None for another expression."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])
