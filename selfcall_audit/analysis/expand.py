"""Call expansion: the server-client calls each call site makes, directly or through helpers.

A helper (an agent method or a function) whose client call takes its target or route from its
parameters is expanded at each of its call sites, with the parameters bound to the arguments:
the finding lands on the call that supplies both the own name and the route. So is a method of an
object the agent builds (`self.chat = ChatModel(agent=self)`, `Courier().deliver(self, body)`),
with what its construction gave the object's attributes counting as parameters too.
"""

from __future__ import annotations

from collections.abc import Callable
from math import inf
from typing import NamedTuple

from ..ftypes import Evidence
from ..workspace.prefilter import POSTER_TOKENS, mentions_any
from .arguments import bind_params, expand_kwargs
from .calls import CLIENT_METHODS, CLIENT_SIGNATURES
from .evaluate import Ctx, Evaluator
from .expr import (
    NONE,
    UNKNOWN,
    Alt,
    Attr,
    Call,
    Expr,
    Global,
    Name,
    Param,
    SelfRef,
    Str,
    contains,
    map_children,
    qualify,
)
from .facts import CallFact, FunctionFacts
from .index import ClassRef, External, FunctionRef
from .limits import LIMITS
from .values import PARAM, FromParam, OwnName, names_route_itself

_PARTIAL = External("functools.partial")


class ClientCall(NamedTuple):
    """A server-client call as seen from one call site, after helpers and partials are expanded."""

    site: CallFact
    client_method: str
    http_method: Expr
    server: Expr
    path: Expr
    receiver: Expr
    via_partial: bool = False
    helper: str | None = None  # the helper the site calls, which makes the client call
    helper_facts: FunctionFacts | None = None  # that helper, when the site calls it on `self`
    via: tuple[Evidence, ...] = ()


class Expander:
    def __init__(self, evaluator: Evaluator, read: Callable[[str], bytes | None] | None = None):
        self.evaluator = evaluator
        self.hierarchy = evaluator.hierarchy
        self.index = evaluator.index
        self.read = read
        self._memo: dict[tuple[FunctionRef, ClassRef | None], list[ClientCall]] = {}
        self._in_progress: set[tuple[FunctionRef, ClassRef | None]] = set()
        self.posters: dict[str, bool] = {}  # files asked whether they could post, and the answer
        # Where a chain of helpers was cut at `LIMITS.helper_depth`: path → the helper not followed.
        self.cut: dict[str, str] = {}

    def client_calls(
        self, function: FunctionFacts, fref: FunctionRef, cls: ClassRef | None
    ) -> list[ClientCall]:
        """Client calls made at this function's call sites, directly or through helpers."""
        key = (fref, cls)
        if key in self._memo:
            return self._memo[key]
        if key in self._in_progress:
            return []
        if len(self._in_progress) > LIMITS.helper_depth:  # said, not silent: a self-call may lie beyond
            self.cut.setdefault(fref.path, ".".join(part for part in (fref.owner, fref.name) if part))
            return []
        self._in_progress.add(key)
        ctx = Ctx(fref.path, cls)
        found: list[ClientCall] = []
        for call in self.evaluator.calls_of(function):
            # A callee bound in branches (`send = self._post if flag else self._send`): each one.
            for func in call.func.options if isinstance(call.func, Alt) else (call.func,):
                found.extend(self._site(call, function, self._stored_callable(func, ctx), ctx))
        self._in_progress.discard(key)
        self._memo[key] = found
        return found

    def _site(self, call: CallFact, function: FunctionFacts, func: Expr, ctx: Ctx) -> list[ClientCall]:
        # Arguments are inlined only for the calls that matter: most calls a method makes do not.
        arguments = None
        via_partial = False
        match func:
            case Call(partial, (inner, *bound_args), bound_kwargs) if (
                self.index.lookup_dotted(ctx.path, partial) == _PARTIAL
            ):
                args, kwargs = self.evaluator.arguments_of(call, function)
                arguments = (*bound_args, *args), (*bound_kwargs, *kwargs)
                func, via_partial = inner, True
        match func:
            case Attr(receiver, method) if method in CLIENT_METHODS and self.evaluator.is_client(
                receiver, ctx
            ):
                return [
                    self._direct(
                        call, func, *(arguments or self.evaluator.arguments_of(call, function)), via_partial
                    )
                ]
        target, fields = self._helper_target(func, ctx), None
        if target is None:
            held = self._held(func, ctx)
            if held is None:
                return []
            target, fields = held
        return self._through_helper(
            call,
            target,
            *(arguments or self.evaluator.arguments_of(call, function)),
            fields,
            ctx,
        )

    def _stored_callable(self, func: Expr, ctx: Ctx) -> Expr:
        """`self._post(...)` where another method stored `self._post = partial(self.server_client.post, ...)`
        or `self._post = self.server_client.post`, or a property returns it: the stored value is
        what is called. `getattr(client, VERB)` with a known verb is `client.post`."""
        match func:
            case Attr(SelfRef(), attr) if ctx.cls is not None:
                read = self.evaluator.property_value(attr, ctx)
                if read is not None and isinstance(read[0], (Attr, Call)):
                    return read[0]
                if self.hierarchy.method(ctx.cls, attr):
                    return func
                found = self.hierarchy.class_binding(ctx.cls, attr)
                if found is not None and isinstance(found[1].expr, (Attr, Call)):
                    return qualify(found[1].expr, found[0].path, {})
            case Call(Name("getattr"), (receiver, verb)):
                names = {
                    "".join(alt)
                    for alt in self.evaluator.path(verb, ctx)
                    if all(isinstance(p, str) for p in alt)
                }  # type: ignore[arg-type]
                if len(names) == 1 and (name := names.pop()) in CLIENT_METHODS:
                    return Attr(receiver, name)
        return func

    def _direct(
        self, call: CallFact, func: Attr, args: tuple[Expr, ...], raw_kwargs: tuple, via_partial: bool
    ) -> ClientCall:
        kwargs, opaque = expand_kwargs(raw_kwargs)
        signature = CLIENT_SIGNATURES.get(func.attr, CLIENT_SIGNATURES["post"])
        values = dict(zip(signature, args))
        values.update({k: v for k, v in kwargs.items() if k in signature})
        missing = UNKNOWN if opaque else NONE
        method = Str(func.attr.upper()) if func.attr != "request" else values.get("method", missing)
        return ClientCall(
            site=call,
            client_method=func.attr,
            http_method=method,
            server=values.get("server_name", missing),
            path=values.get("url_path", missing),
            receiver=func.base,
            via_partial=via_partial,
        )

    def _helper_target(self, func: Expr, ctx: Ctx) -> tuple[FunctionRef, bool] | None:
        """The project function a call reaches, if it lives where a client call can be made."""
        named = isinstance(func, (Name, Global)) or (isinstance(func, Attr) and isinstance(func.base, Name))
        if named and self._silent(self.index.origin(ctx.path, func)):
            return None  # a function in a module that never calls a server client
        return self.evaluator.function_target(func, ctx)

    def _silent(self, origin: str | None) -> bool:
        """Is `origin` a module (not a package's `__init__`, which may re-export) that never names
        a server client?"""
        return origin is not None and not origin.endswith("__init__.py") and not self._may_post(origin)

    def _may_post(self, path: str) -> bool:
        """Could a module hold a helper that posts? Decided on its bytes, before parsing it."""
        if self.read is None:
            return True
        if path not in self.posters:
            self.posters[path] = mentions_any(self.read(path), POSTER_TOKENS)
        return self.posters[path]

    def _held(self, func: Expr, ctx: Ctx) -> tuple[tuple[FunctionRef, bool], dict[str, Expr]] | None:
        """The method `self.chat.generate` reaches where a method stored `self.chat =
        ChatModel(agent=self)`, or `ChatModel(self).generate` reaches, and what the construction
        gave the object's attributes."""
        match func:
            case Attr(Attr(SelfRef(), attr), name) if ctx.cls is not None:
                found = self.hierarchy.class_binding(ctx.cls, attr)
                if found is None or not isinstance(found[1].expr, Call):
                    return None
                built, where = found[1].expr, found[0].path
            case Attr(Call() as built, name):
                where = ctx.path
            case _:
                return None
        origin = self.index.origin(where, built.func)
        if origin != where and self._silent(origin):
            return None  # as for helpers: a class from a module that never calls a server client
        holder = self.index.lookup_dotted(where, built.func)
        method = self.hierarchy.method(holder, name) if isinstance(holder, ClassRef) else None
        if method is None:
            return None
        kwargs = {key: qualify(value, where) for key, value in expand_kwargs(built.kwargs)[0].items()}
        fields = self._fields(holder, tuple(qualify(a, where) for a in built.args), kwargs)
        return (FunctionRef(method[0].path, method[0].name, name), True), fields

    def _fields(self, holder: ClassRef, args: tuple[Expr, ...], kwargs: dict[str, Expr]) -> dict[str, Expr]:
        """What a construction gives an object's attributes: the `__init__` parameters its body
        stores on `self` as they are; without an `__init__` in the project (a pydantic model, a
        dataclass), the keyword arguments by name."""
        init = self.hierarchy.method(holder, "__init__")
        if init is None:
            return kwargs
        owner, facts = init
        klass = self.index.klass(owner)
        if klass is None:
            return {}
        params = bind_params(facts, args, kwargs, skip_self=True)
        end = min((m.line for m in klass.methods if m.line > facts.line), default=inf)
        return {
            b.name: params[b.expr.name]
            for b in klass.instance_attrs
            if isinstance(b.expr, Param) and b.expr.name in params and facts.line < b.line < end
        }

    def _through_helper(
        self,
        call: CallFact,
        target_via: tuple[FunctionRef, bool],
        args: tuple[Expr, ...],
        raw_kwargs: tuple,
        fields: dict[str, Expr] | None,
        ctx: Ctx,
    ) -> list[ClientCall]:
        """Client calls inside a helper that depend on its parameters, seen from this call; with
        `fields`, the helper is a method of an object the caller built, and what the construction
        gave the object's attributes counts as parameters."""
        target, via_self = target_via
        function = self.hierarchy.function(target)
        if function is None:
            return []
        # a method reached through `self` runs with the caller's `self` (the concrete agent)
        caller = ctx.cls if fields is None else None
        owner = (
            caller
            if via_self and caller is not None
            else ClassRef(target.path, target.owner)
            if target.owner
            else None
        )
        inner_calls = self.client_calls(function, target, owner)
        if fields is not None:
            inner_calls = [c for inner in inner_calls if (c := _on_fields(inner, fields)) is not None]
        inner_calls = [c for c in inner_calls if self._forwards(c, Ctx(target.path, owner))]
        bindings = bind_params(function, args, expand_kwargs(raw_kwargs)[0], skip_self=via_self)
        bindings.update((_field(name), value) for name, value in (fields or {}).items())
        result = []
        for inner in inner_calls:
            if self._dispatched_in_process(inner, bindings, target.path, ctx):
                continue
            result.append(
                ClientCall(
                    site=call,
                    client_method=inner.client_method,
                    http_method=qualify(inner.http_method, target.path, bindings),
                    server=qualify(inner.server, target.path, bindings),
                    path=qualify(inner.path, target.path, bindings),
                    receiver=qualify(inner.receiver, target.path, bindings),
                    helper=function.name,
                    helper_facts=function if via_self and fields is None else None,
                    via=(Evidence(target.path, inner.site.line, "through", function.name), *inner.via),
                )
            )
        return result

    def _dispatched_in_process(
        self, inner: ClientCall, bindings: dict[str, Expr], path: str, ctx: Ctx
    ) -> bool:
        """Does the helper post only to other servers than the one this call names: the call's
        target is the agent itself, and the helper handles that case in-process before posting
        (`if server_name == self.config.name: return await self.responses(...)`)?"""
        if not (isinstance(inner.server, Param) and inner.server.name in inner.site.not_own):
            return False
        given = qualify(inner.server, path, bindings)
        return any(isinstance(s, OwnName) for s in self.evaluator.server(given, ctx))

    def _forwards(self, call: ClientCall, ctx: Ctx) -> bool:
        """Does the call's target or route depend on the enclosing function's parameters?

        A client passed in counts only outside classes: a method that names the target and the
        route itself is reported where it makes the call, not again at each of its callers."""
        paths = self.evaluator.path(call.path, ctx)
        return (
            (ctx.cls is None and _rooted_at_param(call.receiver))  # `client.post`, `agent.server_client.post`
            or _rooted_at_param(call.server, through="config")  # `agent.config.name`: maybe the agent's own
            or any(isinstance(s, FromParam) for s in self.evaluator.server(call.server, ctx))
            or (
                any(PARAM in alt for alt in paths)
                and not names_route_itself(paths, self.evaluator.settings.route)
            )
            or contains(call.http_method, Param)
        )


def _rooted_at_param(expr: Expr, through: str | None = None) -> bool:
    """An attribute chain on a parameter (`agent.server_client`), through `through` if given."""
    attrs = []
    while isinstance(expr, Attr):
        attrs.append(expr.attr)
        expr = expr.base
    return isinstance(expr, Param) and (through is None or through in attrs)


def _field(name: str) -> str:
    """The parameter an attribute of a built object stands for (no parameter name has a dot)."""
    return f"self.{name}"


def _on_fields(call: ClientCall, fields: dict[str, Expr]) -> ClientCall | None:
    """A built object's client call with the attributes its construction gave as parameters; None
    when it still reads the object itself (its `self.config.name` is its own, not the agent's)."""

    def swap(expr: Expr) -> Expr:
        match expr:
            case Attr(SelfRef(), attr) if attr in fields:
                return Param(_field(attr))
        return map_children(expr, swap)

    swapped = {key: swap(getattr(call, key)) for key in ("http_method", "server", "path", "receiver")}
    return None if any(contains(e, SelfRef) for e in swapped.values()) else call._replace(**swapped)
