"""Per-file facts: what one module says about classes, constants and calls, as pure data
(`extract` works them out).

Expressions are typed nodes (`expr.py`) with each function's local bindings already resolved,
so that resolution across modules never needs the syntax tree.

Named tuples, as the results' value types are: a frozen dataclass takes ten times as long to
define, and `dataclasses` loads `inspect`, in every run that parses a file (`benchmarks/README.md`).
Their annotations are evaluated as the classes are made (see `ftypes`).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from ..ftypes import ErrorKind, InputError
from .calls import CallFact
from .expr import UNKNOWN, Expr, inline

__all__ = [
    "Binding",
    "CallFact",
    "ClassFacts",
    "FactsError",
    "FunctionBody",
    "FunctionFacts",
    "Import",
    "ModuleFacts",
]


class Binding(NamedTuple):
    """A name bound to a value: a module or class constant, or an attribute stored on `self`."""

    name: str
    expr: Expr
    line: int


class Import(NamedTuple):
    local: str
    module: str
    name: str | None  # None: the binding is the module itself (`import a.b as c`)
    level: int
    line: int


class FunctionBody:
    """What a function does: its parameters' defaults, its calls, its local bindings (read by
    `Local(index)`) and what it returns (or alternatives).

    Read from the cache, a body stays encoded until one of its fields is first read: a one-file
    run looks up dozens of modules (their imports, classes and bases) but evaluates the bodies of
    few functions, and the bodies are nine tenths of decoding a module's cached facts."""

    __slots__ = ("_decode", "_values")
    _fields = ("defaults", "calls", "locals", "returns")

    def __init__(
        self,
        defaults: tuple[tuple[str, Expr], ...],
        calls: tuple[CallFact, ...],
        locals: tuple[Expr, ...] = (),
        returns: Expr = UNKNOWN,
    ):
        self._values = (defaults, calls, locals, returns)
        self._decode: Callable[[], FunctionBody] | None = None

    @classmethod
    def later(cls, decode: "Callable[[], FunctionBody]") -> "FunctionBody":
        """The body `decode()` gives, called when a field is first read (a partial of a
        module-level function: a body still encoded can be pickled to a worker)."""
        body = cls.__new__(cls)
        body._decode = decode
        return body

    def values(self) -> tuple:
        """The four fields, in `_fields`' order."""
        if self._decode is not None:
            self._values, self._decode = self._decode().values(), None
        return self._values

    defaults = property(lambda self: self.values()[0])
    calls = property(lambda self: self.values()[1])
    locals = property(lambda self: self.values()[2])
    returns = property(lambda self: self.values()[3])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FunctionBody) and self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self.values()))
        return f"FunctionBody({fields})"


class FunctionFacts(NamedTuple):
    name: str
    line: int
    params: tuple[str, ...]
    self_param: str | None
    body: FunctionBody
    is_property: bool = False  # `@property` / `@cached_property`: read as an attribute
    # A method whose whole body is `return await self.server_client.post(k=p, ...)` (`return ...post(...)`
    # in a plain `def`), each value a parameter: (keyword, parameter) pairs; None for any other body.
    forwards: tuple[tuple[str, str], ...] | None = None
    # The lines the definition spans, its decorators included: the fixability check parses only
    # these (see `around.Tree`); (0, 0) when unknown.
    span: tuple[int, int] = (0, 0)

    # the body's fields, read as the function's own
    defaults = property(lambda self: self.body.defaults)
    calls = property(lambda self: self.body.calls)
    locals = property(lambda self: self.body.locals)
    returns = property(lambda self: self.body.returns)


class ClassFacts(NamedTuple):
    name: str
    line: int
    bases: tuple[Expr, ...]
    constants: tuple[Binding, ...]
    instance_attrs: tuple[Binding, ...]
    methods: tuple[FunctionFacts, ...]
    keywords: tuple[tuple[str, Expr], ...] = ()  # of the class statement, read by `__init_subclass__`


class ModuleFacts(NamedTuple):
    path: str
    imports: tuple[Import, ...]
    constants: tuple[Binding, ...]
    classes: tuple[ClassFacts, ...]  # classes defined inside functions included
    functions: tuple[FunctionFacts, ...]
    served: tuple[str, ...]  # classes started by `X.run_webserver()` under `if __name__ == "__main__"`
    noqa: tuple[tuple[int, tuple[str, ...] | None], ...]


def _with_callee(call: CallFact, func: Expr) -> CallFact:
    """The call with this callee: itself when it is the same (most callees bind no local)."""
    return call if func is call.func else call._replace(func=func)


def inlined_arguments(call: CallFact, function: FunctionFacts) -> tuple[tuple[Expr, ...], tuple]:
    """A call's arguments with local bindings substituted: done only for the calls that matter."""
    table = function.locals
    if not table:
        return call.args, call.kwargs
    return tuple(inline(a, table) for a in call.args), tuple((k, inline(v, table)) for k, v in call.kwargs)


class Inlined:
    """The calls of the functions one run reads with the local bindings of their callee
    substituted, and their arguments (`inlined_arguments`), kept by the identity of the facts they
    come from (a function's calls, a call's callee or arguments, and the function's local
    bindings): a base class's methods are read again for each of its agents (hashing facts would
    walk them whole), and a long-lived process's runs share the facts of every file, and every
    function, an edit left as they were (a function an edit moved keeps its calls' callees and
    arguments). `previous`: the last run's; what this run does not read of them is dropped."""

    def __init__(self, previous: "Inlined | None" = None):
        self._previous = previous._entries if previous is not None else {}
        # each entry holds the facts its key is the ids of: no other object can take those ids
        self._entries: dict[tuple[int, ...], tuple[tuple, Any]] = {}

    def calls(self, function: FunctionFacts) -> tuple[CallFact, ...]:
        table = function.locals
        if not table:
            return function.calls
        return self._kept(
            (function.calls, table),
            lambda: tuple(_with_callee(call, self._callee(call.func, table)) for call in function.calls),
        )

    def _callee(self, func: Expr, table: tuple[Expr, ...]) -> Expr:
        return self._kept((func, table), lambda: inline(func, table))

    def arguments(self, call: CallFact, function: FunctionFacts) -> tuple[tuple[Expr, ...], tuple]:
        return self._kept(
            (call.args, call.kwargs, function.locals), lambda: inlined_arguments(call, function)
        )

    def _kept(self, parts: tuple, work_out: Callable[[], Any]) -> Any:
        key = tuple(map(id, parts))
        found = self._entries.get(key) or self._previous.get(key)
        if found is None or any(then is not now for then, now in zip(found[0], parts)):
            found = (parts, work_out())
        self._entries[key] = found
        return found[1]


class FactsError(Exception):
    """The file cannot be turned into facts (syntax error, nesting too deep): what is wrong
    (`ErrorKind`) and where, for the SCA900 entry."""

    def __init__(self, message: str, kind: ErrorKind = "syntax", line: int = 1, column: int = 1):
        super().__init__(message)
        self.kind = kind
        self.line = line
        self.column = column

    def entry(self, path: str) -> InputError:
        return InputError(path, str(self), self.kind, self.line, self.column)
