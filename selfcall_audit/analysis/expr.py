"""Expressions as the analysis keeps them: typed immutable nodes, with each function's local
bindings already resolved, so that resolution across modules never needs the syntax tree.

Nodes are named tuples (a frozen dataclass costs ten times as much to define, and every run that
analyses defines them all), equal only to nodes of their own type: `Seq((x,))` is no `Alt((x,))`.

The facts cache stores them as plain tuples (`encode_value` / `decode_value`): a cache entry
holds data only, never objects to rebuild by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import NamedTuple, get_args

from .limits import LIMITS


class Unknown(NamedTuple):
    """A value the analysis does not follow; `limit` names the bound of `LIMITS` that stopped it,
    if one did (equal to any other unknown: only reports read it)."""

    limit: str = ""


class Str(NamedTuple):
    text: str


class Const(NamedTuple):
    """Another constant (number, None, bool), by its `repr`."""

    text: str


class Join(NamedTuple):
    """Concatenation: `+`, f-strings, `%` and `str.format` templates, `str.join` of a literal list."""

    parts: tuple[Expr, ...]


class Name(NamedTuple):
    """A free name: a module global, an import or a builtin."""

    name: str


class Global(NamedTuple):
    """A free name of the module at `path`: a callee's name carried into its caller's terms."""

    path: str
    name: str


class Param(NamedTuple):
    """A parameter of the enclosing function."""

    name: str


class SelfRef(NamedTuple):
    """The method's `self`."""

    def __bool__(self) -> bool:  # a node is a value, never false (this one has no fields)
        return True


class Attr(NamedTuple):
    """Attribute access (`getattr(x, "attr")` too)."""

    base: Expr
    attr: str


class Call(NamedTuple):
    """A call; a keyword named None is a `**expr` expansion."""

    func: Expr
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str | None, Expr], ...]


class DictOf(NamedTuple):
    """A dict built in place; a key None is a `**expr` expansion."""

    items: tuple[tuple[str | None, Expr], ...]


class Seq(NamedTuple):
    """A list or tuple written in place."""

    items: tuple[Expr, ...]


class Alt(NamedTuple):
    """One of several values (branches, rebinding, `or`, several `return`s)."""

    options: tuple[Expr, ...]


class Item(NamedTuple):
    """A subscript with a string key: `ROUTES["answer"]`, `self.config.participants["proposer"]`."""

    base: Expr
    key: str


class Or(NamedTuple):
    """`a or b`: the first value that is set, the last one when none before it is."""

    options: tuple[Expr, ...]


class Named(NamedTuple):
    """A replacement field of an f-string and the expression written there (`{rollout_id}`):
    how a part the analysis cannot tell is shown."""

    label: str
    value: Expr


class Local(NamedTuple):
    """The value bound to a local variable: `FunctionFacts.locals[index]`."""

    index: int


Expr = (
    Unknown
    | Str
    | Const
    | Join
    | Name
    | Global
    | Param
    | SelfRef
    | Attr
    | Call
    | DictOf
    | Seq
    | Alt
    | Local
    | Item
    | Or
    | Named
)

# in this order, each class's place is its tag in the cache
_NODES: tuple[type, ...] = get_args(Expr)


def _equal_nodes(node: tuple, other: object) -> bool:
    return type(node) is type(other) and tuple.__eq__(node, other)


def _unequal_nodes(node: tuple, other: object) -> bool:
    return not _equal_nodes(node, other)


def compare_by_type(classes: Iterable[type]) -> None:
    """Named tuples of these classes equal only one of their own type with equal fields: as
    tuples, `Seq((x,))` would equal `Alt((x,))` and `("x",)`."""
    for cls in classes:
        cls.__eq__, cls.__ne__ = _equal_nodes, _unequal_nodes


def all_equal(cls: type) -> None:
    """Every value of `cls` equals every other: its fields are for reports only (the limit that
    stopped an evaluation)."""
    cls.__eq__ = lambda one, other: type(other) is cls  # type: ignore[method-assign]
    cls.__ne__ = lambda one, other: type(other) is not cls  # type: ignore[method-assign]
    cls.__hash__ = lambda one: hash(cls)  # type: ignore[method-assign]


compare_by_type(_NODES)
all_equal(Unknown)  # whatever limit stopped it

_LEAVES = frozenset({Unknown, Str, Const, Name, Global, Param, SelfRef, Local})
UNKNOWN = Unknown()
SELF = SelfRef()
NONE = Const("None")


def map_children(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """The same expression with `fn` applied to each sub-expression; leaves stay as they are, and
    so does a node none of whose children changed (no copy: facts keep many such nodes).

    Dispatched on the exact type: this runs for every node the facts keep, and a `match` on
    class patterns tries each case in turn."""
    cls = type(expr)
    if cls in _LEAVES:
        return expr
    if cls is Attr:
        base = fn(expr.base)  # type: ignore[union-attr]
        return expr if base is expr.base else Attr(base, expr.attr)  # type: ignore[union-attr]
    if cls is Item:
        base = fn(expr.base)  # type: ignore[union-attr]
        return expr if base is expr.base else Item(base, expr.key)  # type: ignore[union-attr]
    if cls is Named:
        value = fn(expr.value)  # type: ignore[union-attr]
        return expr if value is expr.value else Named(expr.label, value)  # type: ignore[union-attr]
    if cls is Call:
        func = fn(expr.func)  # type: ignore[union-attr]
        args = tuple(map(fn, expr.args))  # type: ignore[union-attr]
        kwargs = tuple((k, fn(v)) for k, v in expr.kwargs)  # type: ignore[union-attr]
        if func is expr.func and _same(args, expr.args) and _same(kwargs, expr.kwargs, pairs=True):  # type: ignore[union-attr]
            return expr
        return Call(func, args, kwargs)
    if cls is DictOf:
        items = tuple((k, fn(v)) for k, v in expr.items)  # type: ignore[union-attr]
        return expr if _same(items, expr.items, pairs=True) else DictOf(items)  # type: ignore[union-attr]
    old = expr.parts if cls is Join else expr.items if cls is Seq else expr.options  # type: ignore[union-attr]
    new = tuple(map(fn, old))
    return expr if _same(new, old) else cls(new)


def children(expr: Expr) -> list[Expr]:
    """The direct sub-expressions of a node."""
    found: list[Expr] = []
    map_children(expr, lambda child: found.append(child) or child)
    return found


def _same(new: tuple, old: tuple, pairs: bool = False) -> bool:
    if pairs:
        return all(a[1] is b[1] for a, b in zip(new, old))
    return all(a is b for a, b in zip(new, old))


def inline(expr: Expr, table: tuple[Expr, ...] | list[Expr]) -> Expr:
    """Replace `Local` references by the bound values (shared, so memory stays linear).

    The result is cut at `LIMITS.inlined_depth`: a function rebinding one local hundreds of times
    (`url += ...`) must not nest deeper than the evaluation that later reads it can go.
    """
    if not contains(expr, Local):  # the facts keep nothing deeper than the cut
        return expr
    memo: dict[tuple[int, int], Expr] = {}

    def walk(node: Expr, depth: int) -> Expr:
        if depth > LIMITS.inlined_depth:
            return Unknown("inlined_depth")
        if isinstance(node, Local):
            key = (node.index, depth)
            if key not in memo:
                memo[key] = walk(_bound(node, table), depth)
            return memo[key]
        return map_children(node, lambda child: walk(child, depth + 1))

    return walk(expr, 0)


def _bound(local: Local, table: tuple[Expr, ...] | list[Expr]) -> Expr:
    """What a local is bound to, through any chain of plain rebindings (`n = n`, `(x := x)`, a
    thousand of them) in one loop, not one call (or one level of the cut) each."""
    value: Expr = table[local.index]
    for _ in range(len(table)):  # a binding names earlier ones; the bound guards against a cycle
        if not isinstance(value, Local):
            return value
        value = table[value.index]
    return UNKNOWN


def merge(values: list[Expr]) -> Expr:
    """One value for several: itself when they agree, else the alternatives (unknown past the limit)."""
    unique: list[Expr] = []
    for value in values:
        for option in value.options if isinstance(value, Alt) else (value,):
            if option not in unique:
                unique.append(option)
    if len(unique) == 1:
        return unique[0]
    if len(unique) > LIMITS.fact_alternatives:
        return Unknown("fact_alternatives")
    return Alt(tuple(unique))


def prune(expr: Expr, depth: int = 0) -> Expr:
    """Cut what lies deeper than any name or route expression resolution follows.

    Written out rather than through `map_children`: it runs on every value the facts keep."""
    cls = type(expr)
    if cls in _LEAVES:
        return expr
    if depth >= LIMITS.fact_depth:
        return Unknown("fact_depth")
    depth += 1
    if cls is Attr:
        base = prune(expr.base, depth)  # type: ignore[union-attr]
        return expr if base is expr.base else Attr(base, expr.attr)  # type: ignore[union-attr]
    return map_children(expr, lambda child: prune(child, depth))


def qualify(expr: Expr, path: str, bindings: dict[str, Expr] | None = None) -> Expr:
    """An expression of the module at `path` in another module's terms: free names qualified by
    their module; with `bindings`, parameters replaced by the arguments of a call (unknown when
    not given)."""
    match expr:
        case Name(name):
            return Global(path, name)
        case Param(name) if bindings is not None:
            return bindings.get(name, UNKNOWN)
    return map_children(expr, lambda child: qualify(child, path, bindings))


def dotted(expr: Expr) -> str | None:
    """`a.b.c` for a chain of attributes on a free name."""
    match expr:
        case Name(name):
            return name
        case Attr(base, attr):
            prefix = dotted(base)
            return f"{prefix}.{attr}" if prefix else None
    return None


def contains(expr: Expr, kind: type) -> bool:
    """Does the expression hold a node of this kind (`Param`, `Local`)? Dispatched on the exact
    type: inlining asks it of every call's callee before copying any node."""
    cls = type(expr)
    if cls is kind:
        return True
    if cls in _LEAVES:
        return False
    if cls is Attr or cls is Item:
        return contains(expr.base, kind)  # type: ignore[union-attr]
    if cls is Named:
        return contains(expr.value, kind)  # type: ignore[union-attr]
    if cls is Call:
        return (
            contains(expr.func, kind)  # type: ignore[union-attr]
            or any(contains(arg, kind) for arg in expr.args)  # type: ignore[union-attr]
            or any(contains(value, kind) for _, value in expr.kwargs)  # type: ignore[union-attr]
        )
    if cls is DictOf:
        return any(contains(value, kind) for _, value in expr.items)  # type: ignore[union-attr]
    items = expr.parts if cls is Join else expr.items if cls is Seq else expr.options  # type: ignore[union-attr]
    return any(contains(item, kind) for item in items)


# cache codec -------------------------------------------------------------------------------

_TAGS = {cls: tag for tag, cls in enumerate(_NODES)}
_FIELDS = {cls: cls._fields for cls in _NODES}


def _node_encoder(cls: type) -> Callable[[object], object]:
    """The encoder of one node class: its tag, then its fields (encoded when they hold nodes)."""
    tag, names = _TAGS[cls], _FIELDS[cls]
    if not names:
        encoded = (tag,)
        return lambda node: encoded
    read = attrgetter(*names)
    if len(names) == 1:
        if cls in _LEAVES:
            return lambda node: (tag, read(node))
        return lambda node: (tag, encode_value(read(node)))
    if cls in _LEAVES:
        return lambda node: (tag, *read(node))
    return lambda node: (tag, *[encode_value(item) for item in read(node)])


_ENCODERS: dict[type, Callable[[object], object]] = {cls: _node_encoder(cls) for cls in _NODES}
_ENCODERS[Unknown] = lambda node: (_TAGS[Unknown], node.limit) if node.limit else (_TAGS[Unknown],)  # type: ignore[attr-defined]
_ENCODERS[tuple] = lambda items: tuple([encode_value(item) for item in items])  # type: ignore[attr-defined]


def encode_value(value: object) -> object:
    """Expressions (alone, in tuples, in keyword pairs) as plain tuples: a node is its integer tag
    followed by its fields; nothing else in these fields is a tuple starting with an int.
    Dispatched on the exact type to an encoder built per class: a cold scan encodes every node
    the facts keep."""
    encoder = _ENCODERS.get(type(value))
    return value if encoder is None else encoder(value)


def _node_decoder(cls: type) -> Callable[[tuple], object]:
    """The decoder of one node class, the inverse of its encoder."""
    if cls in _LEAVES:
        return lambda value: cls(*value[1:])
    if len(_FIELDS[cls]) == 1:
        return lambda value: cls(decode_value(value[1]))
    return lambda value: cls(*[decode_value(item) for item in value[1:]])


_DECODERS = tuple(_node_decoder(cls) for cls in _NODES)


def decode_value(value: object) -> object:
    """The inverse of `encode_value`."""
    if type(value) is not tuple or not value:
        return value
    if type(value[0]) is int:
        return _DECODERS[value[0]](value)
    return tuple([decode_value(item) for item in value])
