"""Classes and their bases: which are agents, in which order methods and attributes are found,
and which subclasses use a mixin. Every walk is iterative and memoised, so work stays linear in
the number of classes and no inheritance depth can exhaust the interpreter's recursion."""

from __future__ import annotations

from bisect import insort
from collections import defaultdict, deque
from collections.abc import Callable, Collection
from operator import attrgetter
from typing import TYPE_CHECKING

from .calls import CLIENT_METHODS, ROUTING_KWARGS, CallFact
from .expr import UNKNOWN, Alt, Attr, Call, Expr, Local, Name, SelfRef, children
from .facts import Binding, FunctionFacts
from .index import ClassRef, ConstRef, External, FunctionRef, Index
from .limits import LIMITS

if TYPE_CHECKING:
    from ..ftypes import Recognition

# Where a class serves the agent route: the place (path, line) of the registration, or None.
Serves = Callable[[ClassRef], "tuple[str, int] | None"]


class Hierarchy:
    def __init__(
        self,
        index: Index,
        agent_bases: frozenset[str],
        find_subclasses: Callable[[Collection[str]], list[str]] | None = None,
        serves: Serves | None = None,
    ):
        self.index = index
        self.agent_bases = agent_bases
        self.find_subclasses = find_subclasses  # a scoped run: the files that may subclass these names
        # An agent is known by what it serves: a class whose own server setup registers the agent
        # route (and is no model server) is an agent base whatever its name.
        self.serves = serves
        self._bases_memo: dict[ClassRef, list[ClassRef | str]] = {}
        self._mro_memo: dict[ClassRef, list[ClassRef]] = {}
        self._agent_memo: dict[ClassRef, bool] = {}
        self._children: dict[ClassRef, list[ClassRef]] = defaultdict(list)
        self._children_of = 0  # the parsed modules `_children` covers (the first so many)
        self._children_stale = True

    def bases(self, ref: ClassRef) -> list[ClassRef | str]:
        """Direct bases: a ClassRef in the project, or the dotted name of an external class."""
        if ref not in self._bases_memo:
            klass = self.index.klass(ref)
            result: list[ClassRef | str] = []
            for base in klass.bases if klass else ():
                if isinstance(base, Call):  # Generic[...] parametrisations and the like
                    continue
                for symbol in self._through_aliases(ref.path, base):
                    value = symbol.dotted if isinstance(symbol, External) else symbol
                    if isinstance(value, (ClassRef, str)) and value not in result:
                        result.append(value)
            self._bases_memo[ref] = result
        return self._bases_memo[ref]

    def _through_aliases(self, path: str, base: Expr) -> list:
        """What a base expression names, a module-level alias (`AgentBase = mod.SimpleAgent`)
        followed to the class it binds, through at most `LIMITS.import_depth` aliases; where a
        chain is cut, the index keeps the place, said as a chain of re-exports is. Breadth first,
        each alias once: aliases naming each other (`A = A if c else B`) end at once."""
        found = []
        seen = {(path, base)}
        pending = deque([(path, base, 0)])
        while pending:
            where, expr, depth = pending.popleft()
            for symbol in self.index.candidates(where, expr):
                if not isinstance(symbol, ConstRef):
                    if symbol not in found:
                        found.append(symbol)
                    continue
                value = symbol.binding.expr
                options = value.options if isinstance(value, Alt) else (value,)
                aliased = [(symbol.path, o) for o in options if isinstance(o, (Name, Attr))]
                if aliased and depth >= LIMITS.import_depth:
                    self.index.cut.setdefault(symbol.path, (symbol.binding.name, symbol.binding.line))
                    continue
                for alias in aliased:
                    if alias not in seen:
                        seen.add(alias)
                        pending.append((*alias, depth + 1))
        return found

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """Project classes in method-resolution order (depth first, left to right, no repeats)."""
        if ref in self._mro_memo:
            return self._mro_memo[ref]
        order: list[ClassRef] = []
        seen: set[ClassRef] = set()
        stack: list[ClassRef] = [ref]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            order.append(current)
            stack.extend(reversed([b for b in self.bases(current) if isinstance(b, ClassRef)]))
        self._mro_memo[ref] = order
        return order

    def is_agent(self, ref: ClassRef) -> bool:
        """Does the class derive from a configured agent base? Decided once for every class on
        the way up (an inheritance cycle counts as no agent base)."""
        memo = self._agent_memo
        stack: list[tuple[ClassRef, bool]] = [(ref, False)]
        on_path: set[ClassRef] = set()
        while stack:
            current, expanded = stack.pop()
            if current in memo:
                continue
            bases = self.bases(current)
            if expanded:
                on_path.discard(current)
                memo[current] = (
                    self.index.qualname(current) in self.agent_bases
                    or any(
                        base in self.agent_bases if isinstance(base, str) else memo.get(base, False)
                        for base in bases
                    )
                    or (self.serves is not None and self.serves(current) is not None)
                )
                continue
            on_path.add(current)
            stack.append((current, True))
            stack.extend(
                (b, False) for b in bases if isinstance(b, ClassRef) and b not in memo and b not in on_path
            )
        return memo[ref]

    def recognised(self, ref: ClassRef) -> tuple[Recognition, str, int]:
        """How the class was recognised as an agent, for the inventory: the kind (see
        `AgentInfo`), the base's name or the file registering the route, and the route's line."""
        for owner in self.mro(ref):
            name = self.index.qualname(owner)
            if owner != ref and name in self.agent_bases:
                return "base", name, 0
            for base in self.bases(owner):
                if isinstance(base, str) and base in self.agent_bases:
                    return "base", base, 0
            where = self.serves(owner) if self.serves is not None else None
            if where is not None:
                return "route", where[0], where[1]
        return "configured", "", 0

    def is_agent_class(self, ref: ClassRef) -> bool:
        """An agent class of the project (the configured base classes themselves are not)."""
        return self.is_agent(ref) and self.index.qualname(ref) not in self.agent_bases

    def children(self) -> dict[ClassRef, list[ClassRef]]:
        """Direct subclasses among the modules parsed when it was last brought up to date, by path
        (in a file, in order): not in the order files happened to be parsed, which differs between
        a whole run and a run on some files, and decides which agent a finding names first. Modules
        are only ever added, so bringing it up to date reads only the ones parsed since."""
        if self._children_stale:
            self._children_stale = False
            modules = list(self.index.parsed())
            children = self._children
            for ref in (ClassRef(m.path, k.name) for m in modules[self._children_of :] for k in m.classes):
                for base in self.bases(ref):
                    if isinstance(base, ClassRef):
                        insort(children[base], ref, key=_BY_PATH)
            self._children_of = len(modules)
        return self._children

    def descendants(self, ref: ClassRef) -> list[ClassRef]:
        found: dict[ClassRef, None] = {}
        stack = list(self.children().get(ref, []))
        while stack:
            current = stack.pop()
            if current not in found:
                found[current] = None
                stack.extend(self.children().get(current, []))
        return list(found)

    def _parse_subclasses(self, ref: ClassRef, find: Callable[[Collection[str]], list[str]]) -> None:
        """Parse the files that may define subclasses of `ref` (`find`: the files naming one of
        some names), level by level: a subclass's file names its direct base, not necessarily the
        classes above it."""
        asked: set[str] = set()
        seen = {ref}
        level = [ref]
        while level:
            if names := {klass.name for klass in level} - asked:
                asked |= names
                for path in find(names):
                    self.index.module(path)
                self._children_stale = True
            children = self.children()
            level = [child for klass in level for child in children.get(klass, ()) if child not in seen]
            seen.update(level)

    def agents_using(self, ref: ClassRef) -> list[ClassRef]:
        """The agent classes whose code includes `ref`'s methods, nearest first: itself when it is
        one, and, when the class posts, each agent subclass (its methods run with `self` as each
        of them). A mixin's agents may live in files not parsed yet."""
        posts = self._makes_client_calls(ref)
        if self.find_subclasses and posts:
            self._parse_subclasses(ref, self.find_subclasses)
        found = [ref] if self.is_agent(ref) else []
        if found and not posts:
            return found
        reads = self._self_reads(ref) if posts else frozenset()
        # agents whose `self` gives the class's reads the same definitions run it alike: the
        # first of them stands for the others
        runs = {self._definitions(ref, reads)} if found else set()
        seen = {ref}
        queue = deque(self.children().get(ref, []))
        while queue:
            current = queue.popleft()
            if current in seen:
                continue
            seen.add(current)
            if self.is_agent(current) and (run := self._definitions(current, reads)) not in runs:
                found.append(current)
                runs.add(run)
                if not posts:
                    return found
            queue.extend(self.children().get(current, []))
        return found

    def _self_reads(self, ref: ClassRef) -> frozenset[str]:
        """The attributes the class's client calls read on `self` (its own config and client
        aside): what an agent subclass may define otherwise. A method the call reaches through
        `self` and an agent overrides is evaluated in that agent's own class."""
        klass = self.index.klass(ref)
        names: set[str] = set()
        for method in klass.methods if klass else ():
            pending: list[Expr] = []
            for call in method.calls:
                if _names_a_server(call):
                    pending.append(call.func)
                    pending.extend(call.args)
                    pending.extend(value for _, value in call.kwargs)
            seen: set[int] = set()
            while pending:
                expr = pending.pop()
                if isinstance(expr, Attr) and isinstance(expr.base, SelfRef):
                    names.add(expr.attr)
                    names.discard("config")
                    names.discard("server_client")
                elif isinstance(expr, Local):
                    if expr.index not in seen and expr.index < len(method.locals):
                        seen.add(expr.index)
                        pending.append(method.locals[expr.index])
                else:
                    pending.extend(children(expr))
        return frozenset(names)

    def _definitions(self, agent: ClassRef, names: frozenset[str]) -> tuple[tuple[str, ClassRef], ...]:
        """The class each of `names` is found in along the agent's MRO (constants, attributes
        and methods), the names no class defines left out."""
        found: dict[str, ClassRef] = {}
        for owner in self.mro(agent):
            klass = self.index.klass(owner)
            if klass is None:
                continue
            for name in (
                *(b.name for b in (*klass.constants, *klass.instance_attrs)),
                *(m.name for m in klass.methods),
            ):
                if name in names:
                    found.setdefault(name, owner)
        return tuple(sorted(found.items()))

    def _makes_client_calls(self, ref: ClassRef) -> bool:
        """Does the class call a server client itself (a call naming a target or a route)?"""
        klass = self.index.klass(ref)
        return klass is not None and any(
            _names_a_server(call) for method in klass.methods for call in method.calls
        )

    # members along the MRO ----------------------------------------------------------------
    def method(self, ref: ClassRef, name: str) -> tuple[ClassRef, FunctionFacts] | None:
        for owner in self.mro(ref):
            klass = self.index.klass(owner)
            for method in klass.methods if klass else ():
                if method.name == name:
                    return owner, method
        return None

    def class_binding(self, ref: ClassRef, name: str) -> tuple[ClassRef, Binding] | None:
        """A class constant, else an attribute assigned on `self` in any method, along the MRO.
        A declaration (`_client: Client = PrivateAttr()`, `Field(...)`) is no value: an assignment
        wins over it, and its default counts only where nothing assigns the attribute."""
        mro = self.mro(ref)
        declared: tuple[ClassRef, Binding] | None = None
        for attr in ("constants", "instance_attrs"):
            for owner in mro:
                klass = self.index.klass(owner)
                for binding in getattr(klass, attr) if klass else ():
                    if binding.name != name:
                        continue
                    if attr == "constants" and _is_declaration(binding.expr):
                        default = _declared_default(binding.expr)
                        if declared is None and default is not None:
                            declared = owner, Binding(name, default, binding.line)
                        continue
                    return owner, binding
        return declared

    def function(self, ref: FunctionRef) -> FunctionFacts | None:
        if ref.owner is not None:
            found = self.method(ClassRef(ref.path, ref.owner), ref.name)
            return found[1] if found else None
        return self.index.module_function(ref.path, ref.name)


_BY_PATH = attrgetter("path")
_DECLARATIONS = frozenset({"PrivateAttr", "Field", "field"})  # pydantic's and dataclasses'


def _names_a_server(call: CallFact) -> bool:
    func = call.func
    if not (isinstance(func, Attr) and func.attr in CLIENT_METHODS):
        return False
    # a server client names the target (`server_name=`, or first of two positional arguments); a
    # route registration (`app.post("/v1/responses")`) names only a path
    return (len(call.args) > 1 and func.attr != "get") or any(key in ROUTING_KWARGS for key, _ in call.kwargs)


def _is_declaration(expr: Expr) -> bool:
    func = expr.func if isinstance(expr, Call) else None
    name = func.attr if isinstance(func, Attr) else func.name if isinstance(func, Name) else None
    return name in _DECLARATIONS


def _declared_default(expr: Call) -> Expr | None:
    """The default a declaration gives (`PrivateAttr(default=x)`, `Field(x)`), None for none
    (`Field(...)`, `PrivateAttr()`, a `default_factory`)."""
    for key, value in expr.kwargs:
        if key == "default":
            return value
    if expr.args and expr.args[0] != UNKNOWN:
        return expr.args[0]
    return None
