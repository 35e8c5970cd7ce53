"""Python's value-building forms as expressions: `%` formatting, `str.format`, `str.join` and
f-string fields read as the concatenations they make, with unknown parts where the text cannot be
told; `getattr` with a literal name and `dict(...)` as what they build."""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable

from .expr import UNKNOWN, Attr, DictOf, Expr, Join, Name, Seq, Str, Unknown

_PERCENT_FIELD = re.compile(r"%(?:\((\w+)\))?[-#0 +]*(?:\d+)?(?:\.\d+)?([a-zA-Z%])")


def percent_format(template: str, values: Expr) -> Expr:
    """`"/v1/%s" % x` as a concatenation: `%s` fields take the values in order (or by key from a
    dict); other conversions (`%d`, `%r`, ...) are unknown parts."""
    positional = list(values.items) if isinstance(values, Seq) else [values]
    by_key = {k: v for k, v in values.items if k is not None} if isinstance(values, DictOf) else {}
    parts: list[Expr] = []
    position = 0
    for match in _PERCENT_FIELD.finditer(template):
        parts.append(Str(template[position : match.start()]))
        position = match.end()
        key, conversion = match.groups()
        if conversion == "%":
            parts.append(Str("%"))
            continue
        value = by_key.get(key, UNKNOWN) if key else (positional.pop(0) if positional else UNKNOWN)
        parts.append(value if conversion == "s" else UNKNOWN)
    parts.append(Str(template[position:]))
    return Join(tuple(parts))


def str_format(template: str, args: list[Expr], kwargs: tuple[tuple[str | None, Expr], ...]) -> Expr:
    """`"/v1/{}".format(x)` as a concatenation; fields with a format spec, a conversion or an
    attribute/index lookup are unknown parts."""
    named = {key: value for key, value in kwargs if key is not None}
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return UNKNOWN
    parts: list[Expr] = []
    auto = 0
    for literal, field_name, spec, conversion in fields:
        parts.append(Str(literal))
        if field_name is None:
            continue
        if field_name == "":
            field_name, auto = str(auto), auto + 1
        if field_name.isdigit():
            value = args[int(field_name)] if int(field_name) < len(args) else UNKNOWN
        else:
            value = named.get(field_name, UNKNOWN)
        parts.append(UNKNOWN if spec or conversion not in (None, "s") else value)
    return Join(tuple(parts))


def str_join(separator: str, items: Seq) -> Expr:
    """`"/".join(["", "v1", x])` as a concatenation, for a list or tuple written in place."""
    parts: list[Expr] = []
    for number, item in enumerate(items.items):
        if number:
            parts.append(Str(separator))
        parts.append(item)
    return Join(tuple(parts)) if parts else Str("")


def built_value(
    func: Expr, args: list[Expr], kwargs: tuple[tuple[str | None, Expr], ...], deref: Callable[[Expr], Expr]
) -> Expr | None:
    """What a call of a builtin that builds a value makes (`getattr(x, "a")`, `dict(k=v)`,
    `"...".format(...)`, `"/".join(parts)`), None for any other call; `deref` reads a local."""
    kind = type(func)  # plain checks: this runs for every call in every file
    if kind is Name:
        if func.name == "getattr" and len(args) == 2 and type(args[1]) is Str:  # type: ignore[union-attr]
            return Attr(args[0], args[1].text)  # type: ignore[union-attr]
        if func.name == "dict" and not args:  # type: ignore[union-attr]
            return DictOf(kwargs)
    elif kind is Attr and type(func.base) is Str:  # type: ignore[union-attr]
        if func.attr == "format":  # type: ignore[union-attr]
            return str_format(func.base.text, args, kwargs)  # type: ignore[union-attr]
        items = deref(args[0]) if len(args) == 1 and not kwargs else None
        if func.attr == "join" and isinstance(items, Seq):  # type: ignore[union-attr]
            return str_join(func.base.text, items)  # type: ignore[union-attr]
        if func.attr == "join" and type(items) is Unknown and items.limit:  # type: ignore[union-attr]
            return items  # too many segments to keep: the joined path is cut by the same bound
    return None


def field_label(node: ast.expr) -> str | None:
    """An f-string field as written, when it is a name, an attribute chain, a string-keyed
    subscript or a call of one (`{rollout_id}`, `{body.rid}`, `{prefix(rid)}`); None otherwise."""
    match node:
        case ast.Name(id=name):
            return name
        case ast.Attribute(value=base, attr=attr):
            inner = field_label(base)
            return f"{inner}.{attr}" if inner else None
        case ast.Subscript(value=base, slice=ast.Constant(value=str() as key)):
            inner = field_label(base)
            return f"{inner}[{key!r}]" if inner else None
        case ast.Call(func=func):
            inner = field_label(func)
            return f"{inner}(...)" if inner else None
    return None
