"""Cached values as plain data: value types (the results' and the facts' named tuples, and a
function's body) become `(name, *fields)` tuples, expressions the analysis' own tuples, and back.

The cache holds data only (marshal of tuples and strings, never pickle: a cache cannot run
code); decoding checks each value against the type the schema expects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache, lru_cache, partial
from operator import attrgetter
from typing import TYPE_CHECKING

from ..ftypes import (
    AgentInfo,
    Blocker,
    CallArgument,
    CallDescription,
    CallReceiver,
    Evidence,
    Finding,
    InputError,
    LocalBinding,
)

if TYPE_CHECKING:
    from typing import Any


class _Schema:
    """Cached value types by name, their fields, and the fields that hold cached value types
    (a "*" suffix: a tuple of them; "~": decoded when first read, see `FunctionBody`) or
    expressions ("Expr": the analysis' own codec); every other field is plain data, stored as it
    is."""

    def __init__(self, classes: tuple[type, ...], nested: dict[type, dict[str, str]]):
        self.types = {cls.__name__: cls for cls in classes}
        self.fields = {cls: cls._fields for cls in classes}  # type: ignore[attr-defined]
        self.nested = nested


_REPORT_SCHEMA = _Schema(
    (
        Finding,
        Evidence,
        AgentInfo,
        InputError,
        CallDescription,
        CallReceiver,
        CallArgument,
        LocalBinding,
        Blocker,
    ),
    {
        Finding: {
            "evidence": "Evidence*",
            "call": "CallDescription",
            "config": "Evidence",
            "fix_blocker": "Blocker",
        },
        CallDescription: {
            "receiver": "CallReceiver",
            "arguments": "CallArgument*",
            "bindings": "LocalBinding*",
            "blocker": "Blocker",
            "at_site": "Blocker",
        },
    },
)


@lru_cache(maxsize=1)
def _analysis_schema() -> _Schema:
    """Built on first use: a run answered from the snapshot never imports the analysis modules."""
    from ..analysis import facts, gym_config, yaml_nodes

    return _Schema(
        (
            facts.Binding,
            facts.CallFact,
            facts.ClassFacts,
            facts.FunctionBody,
            facts.FunctionFacts,
            facts.Import,
            facts.ModuleFacts,
            gym_config.AgentInstance,
            gym_config.ServerRef,
            yaml_nodes.Where,
        ),
        {
            facts.ModuleFacts: {
                "imports": "Import*",
                "constants": "Binding*",
                "classes": "ClassFacts*",
                "functions": "FunctionFacts*",
            },
            facts.ClassFacts: {
                "bases": "Expr",
                "constants": "Binding*",
                "instance_attrs": "Binding*",
                "methods": "FunctionFacts*",
                "keywords": "Expr",
            },
            facts.FunctionFacts: {"body": "FunctionBody~"},
            facts.FunctionBody: {
                "defaults": "Expr",
                "calls": "CallFact*",
                "locals": "Expr",
                "returns": "Expr",
            },
            facts.Binding: {"expr": "Expr"},
            facts.CallFact: {"func": "Expr", "args": "Expr", "kwargs": "Expr"},
            gym_config.AgentInstance: {"where": "Where", "refs": "ServerRef*"},
            gym_config.ServerRef: {"where": "Where"},
        },
    )


@lru_cache(maxsize=1)
def _expr_codec() -> tuple[Callable[[object], object], Callable[[object], object]]:
    """How expression fields become plain tuples and back (imported with the analysis modules)."""
    from ..analysis.expr import decode_value, encode_value

    return encode_value, decode_value


def _schema_for(cls_or_name: type | str) -> _Schema:
    known = _REPORT_SCHEMA.types if isinstance(cls_or_name, str) else _REPORT_SCHEMA.fields
    return _REPORT_SCHEMA if cls_or_name in known else _analysis_schema()


@cache
def _plan(name: str) -> tuple[type, tuple[str, ...], tuple[tuple[int, str, str, bool, bool], ...]]:
    """The class named `name`, its fields, and for each field holding cached value types: its
    place among the fields, its name, their class name, whether it is a tuple of them ("*") and
    whether it is decoded when first read ("~"); worked out once per class."""
    schema = _schema_for(name)
    cls = schema.types[name]
    names = schema.fields[cls]
    nested = schema.nested.get(cls, {})
    steps = tuple(
        (place, field_name, kind.rstrip("*~"), "*" in kind, kind.endswith("~"))
        for place, field_name in enumerate(names)
        if (kind := nested.get(field_name))
    )
    return cls, names, steps


@cache
def _encoder(name: str) -> Callable[[Any], tuple]:
    """The encoder of one class, built once: its fields read at once, then each field holding
    value types or expressions encoded in turn (a cold scan encodes tens of thousands of values)."""
    _, names, steps = _plan(name)
    read = attrgetter(*names)
    encoders: list[tuple[int, Callable[[Any], object]]] = []
    for place, _, nested, many, _ in steps:
        if nested == "Expr":
            encoders.append((place + 1, _expr_codec()[0]))
        else:
            encoders.append((place + 1, _many(_encoder(nested)) if many else _encoder(nested)))

    def encode_one(value: Any) -> tuple:
        encoded = [name, *read(value)] if len(names) > 1 else [name, read(value)]
        for place, encode_field in encoders:
            item = encoded[place]
            if item is not None:  # an optional one (a finding without a call description)
                encoded[place] = encode_field(item)
        return tuple(encoded)

    return encode_one


def _many(encode_one: Callable[[Any], tuple]) -> Callable[[Iterable[Any]], tuple]:
    return lambda items: tuple([encode_one(item) for item in items])


def encode(value: Any) -> tuple:
    """A value type becomes (name, *fields), nested ones likewise."""
    return _encoder(type(value).__name__)(value)


def encode_all(values: Iterable[Any]) -> tuple:
    return tuple([encode(value) for value in values])


def decode(value: tuple, expected: str) -> Any:
    """The inverse of `encode` for one value, checked against the type the schema expects (a
    field decoded when first read is checked then)."""
    if value[0] != expected:
        raise TypeError(f"{value[0]} where {expected} was expected")
    cls, names, steps = _plan(expected)
    if len(value) != len(names) + 1:
        raise ValueError(f"{expected} with {len(value) - 1} fields where {len(names)} were expected")
    values = list(value[1:])
    for place, _, nested, many, later in steps:
        item = values[place]
        if item is not None:  # an optional one
            decode_field = _field_decoder(nested, many)
            values[place] = (
                _plan(nested)[0].later(partial(decode_field, item)) if later else decode_field(item)
            )
    if issubclass(cls, tuple):  # a named tuple
        return tuple.__new__(cls, values)
    return cls(*values)


@cache
def _field_decoder(nested: str, many: bool) -> Callable[[Any], Any]:
    """Decodes one field's value; a module-level function or a partial of one, so that an
    instance still holding an encoded field can be pickled to a worker."""
    if nested == "Expr":
        return _expr_codec()[1]
    return partial(decode_many if many else decode, expected=nested)


def decode_many(values: Iterable[tuple], expected: str) -> tuple:
    return tuple([decode(value, expected) for value in values])
