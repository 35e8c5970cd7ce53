"""A call's arguments as the parameters of the function it calls: what evaluating its body, or
following a value into it, binds each parameter to."""

from __future__ import annotations

from .expr import UNKNOWN, DictOf, Expr
from .facts import FunctionFacts


def expand_kwargs(kwargs: tuple[tuple[str | None, Expr], ...]) -> tuple[dict[str, Expr], bool]:
    """Keyword arguments with `**{...}` dicts built in the function spread; True if a splat is opaque."""
    result: dict[str, Expr] = {}
    opaque = False
    for key, value in kwargs:
        if key is not None:
            result[key] = value
        elif isinstance(value, DictOf):
            inner, inner_opaque = expand_kwargs(value.items)
            result.update(inner)
            opaque = opaque or inner_opaque
        else:
            opaque = True
    return result, opaque


def bind_params(
    function: FunctionFacts, args: tuple[Expr, ...], kwargs: dict[str, Expr], skip_self: bool
) -> dict[str, Expr]:
    """The values a call gives the function's parameters (defaults where it gives none)."""
    params = list(function.params)
    if skip_self and function.self_param and params and params[0] == function.self_param:
        params = params[1:]
    bound: dict[str, Expr] = dict(function.defaults)
    bound.update(zip(params, args))
    bound.update((name, value) for name, value in kwargs.items() if name in function.params)
    if function.self_param and not skip_self:
        bound.setdefault(function.self_param, UNKNOWN)
    return bound
