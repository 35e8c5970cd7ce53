"""The bounds of the analysis, in one place: what it gives up on rather than work without end."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    fact_alternatives: int = 8  # values one name may hold in a function before it is unknown
    fact_depth: int = 8  # nesting of an expression kept in the facts
    inlined_depth: int = 32  # nesting once local bindings are substituted
    sequence_items: int = 16  # items of a list or tuple written in place kept (path segments)
    alternatives: int = 16  # strings one expression may evaluate to
    evaluation_depth: int = 25  # names, constants and calls followed to evaluate one expression
    helper_depth: int = 25  # helpers followed from one call site to the client call they make
    import_depth: int = 30  # re-exports followed to find what an imported name is


LIMITS = Limits()
