"""Python's string-building forms as expressions: `%` formatting, `str.format` and `str.join`
read as the concatenations they make, with unknown parts where the text cannot be told."""

from __future__ import annotations

import re
import string

from .expr import UNKNOWN, DictOf, Expr, Join, Seq, Str

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
