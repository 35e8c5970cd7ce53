"""A file's functions as last extracted, kept between the runs of a long-lived process (the
language server's) so that an edit to one function leaves the others' facts as they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .facts import Binding, ClassFacts, FunctionBody, FunctionFacts, Import


class Walked(NamedTuple):
    """A function's facts and what walking it added to its module's and class's (imports and
    classes it defines, attributes it stores on `self`), to add again where it is reused."""

    facts: FunctionFacts
    imports: tuple[Import, ...]
    nested: tuple[ClassFacts, ...]
    attrs: tuple[tuple[str, tuple[Binding, ...]], ...]

    def moved(self, lines: int) -> Walked:
        """The same function `lines` further down the file: every line its facts name moves as
        much (nothing else in them depends on where it stands)."""
        return Walked(
            _moved_function(self.facts, lines),
            tuple(found._replace(line=found.line + lines) for found in self.imports),
            tuple(_moved_class(klass, lines) for klass in self.nested),
            tuple((name, _moved_bindings(bindings, lines)) for name, bindings in self.attrs),
        )


def _moved_function(function: FunctionFacts, lines: int) -> FunctionFacts:
    first, last = function.span
    calls = tuple(
        call._replace(
            line=call.line + lines,
            end_line=call.end_line + lines,
            aliases=tuple((name, line + lines, part) for name, line, part in call.aliases),
        )
        for call in function.calls
    )
    return function._replace(
        line=function.line + lines,
        body=FunctionBody(function.defaults, calls, function.locals, function.returns),
        span=(first + lines, last + lines),
    )


def _moved_class(klass: ClassFacts, lines: int) -> ClassFacts:
    return klass._replace(
        line=klass.line + lines,
        constants=_moved_bindings(klass.constants, lines),
        instance_attrs=_moved_bindings(klass.instance_attrs, lines),
        methods=tuple(_moved_function(method, lines) for method in klass.methods),
    )


def _moved_bindings(bindings: tuple[Binding, ...], lines: int) -> tuple[Binding, ...]:
    return tuple(binding._replace(line=binding.line + lines) for binding in bindings)


class Functions:
    """The functions of one file as last extracted, kept between the runs of a long-lived process
    by what their facts are worked out from: the bytes of their lines (decorators included) and
    whether they are methods. An edit to one function leaves the others as they were; one above
    a function moves its lines, and the lines its facts name are moved with them. Each
    extraction keeps the entries it used: one version of the file, not every keystroke's."""

    def __init__(self, previous: Functions | None = None):
        self._previous = previous._entries if previous is not None else {}
        # and the line the function started at
        self._entries: dict[tuple[bytes, bool], tuple[Walked, int]] = {}

    def get(self, key: tuple[bytes, bool], first: int, walk: Callable[[], Walked]) -> Walked:
        """The function starting at line `first`."""
        walked, then = self._entries.get(key) or self._previous.get(key) or (walk(), first)
        if then != first:
            walked = walked.moved(first - then)
        self._entries[key] = walked, first
        return walked
