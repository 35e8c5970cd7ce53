"""Resolution over the whole index: agent classes, own names, routes, call targets → findings.

Every server-client call inside an agent class (or a base or mixin of one) is evaluated
symbolically: the server name against the agent's own name (aliases, YAML instance names,
config references that YAML points back at the instance), the path against the routes the
agent serves. Helpers that forward their parameters into a client call are expanded at each
call site, so a finding lands on the call that supplies both the own name and the route.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import product

from ..config import Settings
from ..ftypes import Evidence, Finding
from ..rules import RULES
from ..workspace.prefilter import POSTER_TOKENS, mentions_any, word_matcher
from .facts import (
    CLIENT_METHODS,
    ROUTE_METHODS,
    SELF,
    UNKNOWN,
    CallFact,
    Expr,
    FunctionFacts,
    inline,
    map_children,
)
from .gym_config import AgentInstance
from .index import ClassRef, FunctionRef, Index

HOLE: Expr = ("?",)
PREFIX: Expr = ("prefix",)
PARAM: Expr = ("p",)
_MAX_ALTERNATIVES = 16
_MAX_DEPTH = 25
_ROLLOUT_PREFIX = re.compile(r"^/ng-rollout/[^/]+(?:/training-token-capture)?(?=/)")
_HELPER_KWARGS = frozenset({"server_name", "url_path", "json", "cookies", "headers"})
_CLIENT_SIGNATURES = {"request": ("server_name", "url_path", "method")}
_DEFAULT_SIGNATURE = ("server_name", "url_path")
_PATH_JOINS = (("external", "os.path.join"), ("external", "posixpath.join"))


@dataclass(frozen=True)
class ClientCall:
    """A server-client call as seen from one call site, after helpers and partials are expanded."""

    site: CallFact
    http_method: Expr
    server: Expr
    path: Expr
    receiver: Expr
    extra_kwargs: tuple[str, ...]
    via: tuple[Evidence, ...] = ()
    blocker: str | None = None  # why the codemod cannot rewrite this call


@dataclass
class _Ctx:
    path: str
    cls: ClassRef | None
    evidence: list[Evidence] = field(default_factory=list)


def _contains_param(expr: object) -> bool:
    if isinstance(expr, tuple):
        if expr and expr[0] == "p":
            return True
        return any(_contains_param(item) for item in expr)
    return False


def _rooted_at_param(expr: Expr, through: str | None = None) -> bool:
    """An attribute chain on a parameter (`agent.server_client`), through `through` if given."""
    attrs = []
    while expr[0] == "a":
        attrs.append(expr[2])
        expr = expr[1]
    return expr[0] == "p" and (through is None or through in attrs)


def _qualify(expr: Expr, bindings: dict[str, Expr], callee_path: str) -> Expr:
    """Rewrite a callee's expression into the caller's terms: parameters → arguments, globals → qualified."""
    kind = expr[0]
    if kind == "p":
        return bindings.get(expr[1], UNKNOWN)
    if kind == "n":
        return ("g", callee_path, expr[1])
    return map_children(expr, lambda child: _qualify(child, bindings, callee_path))


def _globalise(expr: Expr, path: str) -> Expr:
    """Module-level names qualified by the module they are read in, so another module's
    function can be evaluated with them."""
    if expr[0] == "n":
        return ("g", path, expr[1])
    return map_children(expr, lambda child: _globalise(child, path))


def _expand_kwargs(kwargs: tuple[tuple[str | None, Expr], ...]) -> tuple[dict[str, Expr], bool]:
    """Keyword arguments with `**{...}` dicts built in the function spread; True if a splat is opaque."""
    result: dict[str, Expr] = {}
    opaque = False
    for key, value in kwargs:
        if key is not None:
            result[key] = value
        elif value[0] == "d":
            inner, inner_opaque = _expand_kwargs(value[1])
            result.update(inner)
            opaque = opaque or inner_opaque
        else:
            opaque = True
    return result, opaque


def _bind_params(
    function: FunctionFacts, args: tuple[Expr, ...], kwargs: dict[str, Expr], skip_self: bool
) -> dict[str, Expr]:
    params = list(function.params)
    if skip_self and function.self_param and params and params[0] == function.self_param:
        params = params[1:]
    bound: dict[str, Expr] = dict(function.defaults)
    for name, value in zip(params, args):
        bound[name] = value
    for name, value in kwargs.items():
        if name in function.params:
            bound[name] = value
    if function.self_param and not skip_self:
        bound.setdefault(function.self_param, UNKNOWN)
    return bound


class Resolver:
    def __init__(
        self,
        index: Index,
        settings: Settings,
        instances: list[AgentInstance],
        find_subclasses: Callable[[str], list[str]] | None = None,
        read: Callable[[str], bytes | None] | None = None,
    ):
        self.index = index
        self.find_subclasses = find_subclasses
        self.read = read
        self.settings = settings
        self.instances = instances
        self._calls_memo: dict[tuple[FunctionRef, ClassRef | None], list[ClientCall]] = {}
        self._in_progress: set[tuple[FunctionRef, ClassRef | None]] = set()
        self._routes_memo: dict[ClassRef, dict[str, str | None]] = {}
        self._route_sources: dict[ClassRef, dict[str, Evidence]] = {}
        self._served_memo: dict[str, list[ClassRef]] = {}
        self._children: dict[ClassRef, list[ClassRef]] | None = None
        self._inlined: dict[int, tuple[CallFact, ...]] = {}
        self._running: dict[ClassRef, list[AgentInstance]] = {}
        self._mapped_all = False
        self.posters: dict[str, bool] = {}  # files asked whether they could post, and the answer

    def calls_of(self, function: FunctionFacts) -> tuple[CallFact, ...]:
        """The function's calls; their callees with local bindings substituted."""
        key = id(function)
        if key not in self._inlined:
            table = function.locals
            self._inlined[key] = (
                tuple(replace(call, func=inline(call.func, table)) for call in function.calls)
                if table
                else function.calls
            )
        return self._inlined[key]

    @staticmethod
    def arguments(call: CallFact, function: FunctionFacts) -> tuple[tuple[Expr, ...], tuple]:
        """Arguments with local bindings substituted: done only for calls that matter."""
        table = function.locals
        if not table:
            return call.args, call.kwargs
        return tuple(inline(a, table) for a in call.args), tuple(
            (k, inline(v, table)) for k, v in call.kwargs
        )

    # classes and instances ---------------------------------------------------------------
    def children(self) -> dict[ClassRef, list[ClassRef]]:
        if self._children is None:
            children: dict[ClassRef, list[ClassRef]] = defaultdict(list)
            for ref in (ClassRef(m.path, k.name) for m in self.index.parsed() for k in m.classes):
                for base in self.index.bases(ref):
                    if isinstance(base, ClassRef):
                        children[base].append(ref)
            self._children = children
        return self._children

    def agent_using(self, ref: ClassRef) -> ClassRef | None:
        """The agent class whose MRO contains `ref`: itself when it is one, else the nearest
        subclass that is one (breadth first)."""
        if self.index.is_agent(ref):
            return ref
        if self.find_subclasses and self._makes_client_calls(ref):
            for path in self.find_subclasses(ref.name):  # a mixin: its agents may live elsewhere
                self.index.module(path)
            self._children = None
        seen = {ref}
        queue = deque(self.children().get(ref, []))
        while queue:
            current = queue.popleft()
            if current in seen:
                continue
            seen.add(current)
            if self.index.is_agent(current):
                return current
            queue.extend(self.children().get(current, []))
        return None

    def _makes_client_calls(self, ref: ClassRef) -> bool:
        klass = self.index.klass(ref)
        return klass is not None and any(
            call.func[0] == "a" and call.func[2] in CLIENT_METHODS
            for method in klass.methods
            for call in method.calls
        )

    def served_classes(self, instance: AgentInstance) -> list[ClassRef]:
        return self._served_in(instance.entrypoint) if instance.entrypoint else []

    def _served_in(self, entry: str) -> list[ClassRef]:
        """Classes an entrypoint module starts: its `X.run_webserver()`, else its agent classes."""
        if entry not in self._served_memo:
            module = self.index.module(entry)
            served: list[ClassRef] = []
            if module is not None:
                for name in module.served:
                    found = self.index.lookup(entry, name)
                    if found and found[0] == "class":
                        served.append(found[1])  # type: ignore[arg-type]
                if not served:
                    served = [
                        ClassRef(entry, k.name)
                        for k in module.classes
                        if self.index.is_agent(ClassRef(entry, k.name))
                    ]
            self._served_memo[entry] = served
        return self._served_memo[entry]

    def instances_running(self, ref: ClassRef) -> list[AgentInstance]:
        """YAML instances whose served class runs the code of `ref`.

        A scoped run loads only the entrypoint modules that name `ref` or one of its subclasses:
        a one-file run must not decode every agent of the project.
        """
        if ref in self._running:
            return self._running[ref]
        if self.find_subclasses is None:  # a whole-project run: map every entrypoint once
            if not self._mapped_all:
                self._mapped_all = True
                running: dict[ClassRef, dict[AgentInstance, None]] = {}
                for instance in self.instances:
                    for served in self.served_classes(instance):
                        for owner in self.index.mro(served):
                            running.setdefault(owner, {})[instance] = None
                self._running.update((owner, list(found)) for owner, found in running.items())
            return self._running.get(ref, [])
        names = {ref.name, *(c.name for c in self._descendants(ref))}
        entries = {i.entrypoint for i in self.instances if i.entrypoint in self.index.py_files}
        loaded: set[str] = set()
        while True:
            named = word_matcher(names)
            new = [e for e in entries - loaded if e == ref.path or (self.read and named(self.read(e)))]
            if not new:
                break
            for entry in new:
                loaded.add(entry)
                for served in self._served_in(entry):
                    mro = self.index.mro(served)
                    if ref in mro:
                        names.update(c.name for c in mro[: mro.index(ref)])
        running = [
            i
            for i in self.instances
            if i.entrypoint in loaded and any(ref in self.index.mro(s) for s in self.served_classes(i))
        ]
        self._running[ref] = running
        return running

    def _descendants(self, ref: ClassRef) -> list[ClassRef]:
        found: dict[ClassRef, None] = {}
        stack = list(self.children().get(ref, []))
        while stack:
            current = stack.pop()
            if current not in found:
                found[current] = None
                stack.extend(self.children().get(current, []))
        return list(found)

    # routes ------------------------------------------------------------------------------
    def own_routes(self, ref: ClassRef) -> dict[str, str | None]:
        """Routes the agent serves, by normalised template, each with the name of the method that
        handles it (None when not known); where code registers one is kept as evidence."""
        if ref not in self._routes_memo:
            routes: dict[str, str | None] = dict.fromkeys(
                _normal_route(t) for t in (self.settings.route, *self.settings.own_routes)
            )
            sources: dict[str, Evidence] = {}
            for owner in self.index.mro(ref):
                klass = self.index.klass(owner)
                for method in klass.methods if klass else ():
                    for call in self.calls_of(method):
                        ctx = _Ctx(owner.path, owner)
                        for text, handler in self._registered_route(call, method, ctx):
                            normal = _normal_route(text)
                            if routes.get(normal) is None:
                                routes[normal] = handler
                            note = f"route `{text}` is registered here"
                            sources.setdefault(normal, Evidence(owner.path, call.line, note))
            self._routes_memo[ref] = routes
            self._route_sources[ref] = sources
        return self._routes_memo[ref]

    def responses_routes(self, ref: ClassRef) -> frozenset[str]:
        """The agent's own routes that reach its `/v1/responses` handler: the route itself and any
        other route registered with the same handler (a suffixed or prefixed twin)."""
        routes = self.own_routes(ref)
        main = _normal_route(self.settings.route)
        handler = routes.get(main)
        return frozenset(t for t, h in routes.items() if t == main or (handler is not None and h == handler))

    def _registered_route(
        self, call: CallFact, function: FunctionFacts, ctx: _Ctx
    ) -> list[tuple[str, str | None]]:
        """`app.post("/path")(handler)`, `app.add_api_route("/path", handler)`: routes the agent
        serves, with the name of their handler when it is a method of the agent."""
        func = call.func
        handler: Expr = UNKNOWN
        args, raw_kwargs = self.arguments(call, function)
        if func[0] == "c" and func[1][0] == "a" and func[1][2] in ROUTE_METHODS:
            handler = args[0] if args else UNKNOWN  # the outer call of `app.post(path)(handler)`
            args, raw_kwargs = func[2], func[3]
            func = func[1]
        elif func[0] != "a" or func[2] not in ROUTE_METHODS:
            return []
        kwargs, _ = _expand_kwargs(raw_kwargs)
        if "server_name" in kwargs or self._is_client(func[1], ctx) or not args:
            return []
        if func[2] == "add_api_route":
            handler = args[1] if len(args) > 1 else kwargs.get("endpoint", UNKNOWN)
        name = handler[2] if handler[0] == "a" and handler[1] == SELF else None
        found = []
        for alternative in self.eval_str(args[0], ctx):
            if all(isinstance(part, str) for part in alternative):
                text = "".join(alternative)  # type: ignore[arg-type]
                if text.startswith("/"):
                    found.append((text, name))
        return found

    # client calls ------------------------------------------------------------------------
    def _is_client(self, receiver: Expr, ctx: _Ctx) -> bool:
        if receiver[0] == "p":
            return True
        if receiver[0] == "a" and receiver[2] == "server_client":
            return True
        if receiver[0] == "a" and receiver[1] == SELF and ctx.cls is not None:
            found = self.index.class_binding(ctx.cls, receiver[2])
            return bool(found and found[1].expr[0] == "a" and found[1].expr[2] == "server_client")
        return False

    def _unwrap_partial(
        self, func: Expr, args: tuple[Expr, ...], kwargs: tuple[tuple[str | None, Expr], ...], ctx: _Ctx
    ) -> tuple[Expr, tuple[Expr, ...], tuple[tuple[str | None, Expr], ...], bool]:
        if func[0] == "c" and func[2]:
            target = self.index.lookup_dotted(ctx.path, func[1])
            if target == ("external", "functools.partial"):
                return func[2][0], (*func[2][1:], *args), (*func[3], *kwargs), True
        return func, args, kwargs, False

    def client_calls(
        self, function: FunctionFacts, fref: FunctionRef, cls: ClassRef | None
    ) -> list[ClientCall]:
        """Client calls made at this function's call sites, directly or through helpers."""
        key = (fref, cls)
        if key in self._calls_memo:
            return self._calls_memo[key]
        if key in self._in_progress or len(self._in_progress) > _MAX_DEPTH:
            return []
        self._in_progress.add(key)
        ctx = _Ctx(fref.path, cls)
        found: list[ClientCall] = []
        for call in self.calls_of(function):
            # A callee bound in branches (`send = self._post if flag else self._send`): each one.
            for func in call.func[1] if call.func[0] == "or" else (call.func,):
                arguments = None
                via_partial = False
                func = self._stored_callable(func, ctx)
                if func[0] == "c":
                    args, raw_kwargs = self.arguments(call, function)
                    func, args, raw_kwargs, via_partial = self._unwrap_partial(func, args, raw_kwargs, ctx)
                    arguments = (args, raw_kwargs)
                if func[0] == "a" and func[2] in CLIENT_METHODS and self._is_client(func[1], ctx):
                    args, raw_kwargs = arguments or self.arguments(call, function)
                    kwargs, opaque = _expand_kwargs(raw_kwargs)
                    splatted = any(key is None for key, _ in raw_kwargs)
                    found.append(self._direct_call(call, func, args, kwargs, opaque, via_partial, splatted))
                    continue
                target = self._helper_target(func, ctx)
                if target is not None:
                    args, raw_kwargs = arguments or self.arguments(call, function)
                    found.extend(self._helper_calls(call, target, args, _expand_kwargs(raw_kwargs)[0]))
        self._in_progress.discard(key)
        self._calls_memo[key] = found
        return found

    def _stored_callable(self, func: Expr, ctx: _Ctx) -> Expr:
        """`self._post(...)` where another method stored `self._post = partial(self.server_client.post, ...)`
        or `self._post = self.server_client.post`: the stored value is what is called."""
        if func[0] != "a" or func[1] != SELF or ctx.cls is None or self.index.method(ctx.cls, func[2]):
            return func
        found = self.index.class_binding(ctx.cls, func[2])
        if found is None or found[1].expr[0] not in ("a", "c"):
            return func
        return _globalise(found[1].expr, found[0].path)

    def _direct_call(
        self,
        call: CallFact,
        func: Expr,
        args: tuple[Expr, ...],
        kwargs: dict[str, Expr],
        opaque: bool,
        via_partial: bool,
        splatted: bool = False,
    ) -> ClientCall:
        signature = _CLIENT_SIGNATURES.get(func[2], _DEFAULT_SIGNATURE)
        values = dict(zip(signature, args))
        values.update({k: v for k, v in kwargs.items() if k in signature})
        missing = UNKNOWN if opaque else ("k", "None")
        method = ("s", func[2].upper()) if func[2] != "request" else values.get("method", missing)
        extra = tuple(k for k in kwargs if k not in _HELPER_KWARGS and k != "method")
        blocker = None
        if call.in_with:
            blocker = "the response is used as an async context manager"
        elif via_partial:
            blocker = "the call goes through functools.partial"
        elif opaque:
            blocker = "arguments come from a `**` mapping it cannot see through"
        elif splatted:
            blocker = "arguments come from a `**` expansion: rewrite the call by hand"
        elif len(args) > len(signature):
            blocker = "it passes extra positional arguments"
        elif extra:
            blocker = f"the in-process helper takes no `{extra[0]}` argument"
        return ClientCall(
            site=call,
            http_method=method,
            server=values.get("server_name", missing),
            path=values.get("url_path", missing),
            receiver=func[1],
            extra_kwargs=extra,
            blocker=blocker,
        )

    def _function_target(self, func: Expr, ctx: _Ctx) -> tuple[FunctionRef, bool] | None:
        """The project function a call reaches (and whether through `self`), if any."""
        if func[0] == "a" and ctx.cls is not None and func[1] == SELF:
            found = self.index.method(ctx.cls, func[2])
            return (FunctionRef(found[0].path, found[0].name, func[2]), True) if found else None
        if func[0] == "a" and ctx.cls is not None and func[1][:2] == ("c", ("n", "super")):
            for owner in self.index.mro(ctx.cls)[1:]:
                klass = self.index.klass(owner)
                if klass and any(m.name == func[2] for m in klass.methods):
                    return FunctionRef(owner.path, owner.name, func[2]), True
            return None
        if func[0] in ("n", "g", "a"):
            found_name = self.index.lookup_dotted(ctx.path, func)
            if found_name and found_name[0] == "function":
                return found_name[1], False  # type: ignore[return-value]
        return None

    def _helper_target(self, func: Expr, ctx: _Ctx) -> tuple[FunctionRef, bool] | None:
        """The project function a call reaches, if it lives where a client call can be made."""
        if func[0] in ("n", "g", "a") and not (func[0] == "a" and (func[1] == SELF or func[1][0] == "c")):
            origin = self.index.origin(ctx.path, func)
            if origin and not origin.endswith("__init__.py") and not self._may_post(origin):
                return None  # a function in a module that never calls a server client
        return self._function_target(func, ctx)

    def _may_post(self, path: str) -> bool:
        """Could a module hold a helper that posts? Decided on its bytes, before parsing it."""
        if self.read is None:
            return True
        if path not in self.posters:
            self.posters[path] = mentions_any(self.read(path), POSTER_TOKENS)
        return self.posters[path]

    def _forwarding(self, target: FunctionRef) -> tuple[FunctionFacts, list[ClientCall]] | None:
        """A helper's client calls whose target or route come from its parameters."""
        function = self.index.function(target)
        if function is None:
            return None
        owner = ClassRef(target.path, target.owner) if target.owner else None
        inner = [
            c
            for c in self.client_calls(function, target, owner)
            if self._forwards(c, _Ctx(target.path, owner))
        ]
        return (function, inner) if inner else None

    def _helper_calls(
        self,
        call: CallFact,
        target_via: tuple[FunctionRef, bool],
        args: tuple[Expr, ...],
        kwargs: dict[str, Expr],
    ) -> list[ClientCall]:
        """Client calls inside a helper that depend on its parameters, seen from this call."""
        target, via_self = target_via
        forwarding = self._forwarding(target)
        if forwarding is None:
            return []
        function, inner_calls = forwarding
        bindings = _bind_params(function, args, kwargs, skip_self=via_self)
        result = []
        for inner in inner_calls:
            note = f"through `{function.name}()`, which makes the call at line {inner.site.line}"
            result.append(
                ClientCall(
                    site=call,
                    http_method=_qualify(inner.http_method, bindings, target.path),
                    server=_qualify(inner.server, bindings, target.path),
                    path=_qualify(inner.path, bindings, target.path),
                    receiver=_qualify(inner.receiver, bindings, target.path),
                    extra_kwargs=inner.extra_kwargs,
                    via=(Evidence(target.path, inner.site.line, note), *inner.via),
                    blocker=f"the call goes through the helper `{function.name}()`",
                )
            )
        return result

    def _forwards(self, call: ClientCall, ctx: _Ctx) -> bool:
        """Does the call's target or route depend on the enclosing function's parameters?

        A client passed in counts only outside classes: a method that names the target and the
        route itself is reported where it makes the call, not again at each of its callers."""
        return (
            (ctx.cls is None and _rooted_at_param(call.receiver))  # `client.post`, `agent.server_client.post`
            or _rooted_at_param(call.server, through="config")  # `agent.config.name`: maybe the agent's own
            or any(kind == "param" for kind, _ in self.eval_server(call.server, ctx))
            or any(PARAM in alt for alt in self.eval_str(call.path, ctx))
            or _contains_param(call.http_method)
        )

    # evaluation --------------------------------------------------------------------------
    def _constant(self, expr: Expr, ctx: _Ctx) -> tuple[str, Expr, ClassRef | None] | None:
        """(module path, bound expression, class) of a name, module attribute or class constant."""
        if expr[0] == "a" and expr[2] == "value" and expr[1][0] == "a":  # `Route.RESPONSES.value`
            return self._constant(expr[1], ctx)
        if expr[0] == "a" and expr[1] == SELF and ctx.cls is not None:
            if expr[2] in ("config", "server_client"):
                return None
            found = self.index.class_binding(ctx.cls, expr[2])
            if found is None:
                return None
            owner, binding = found
            ctx.evidence.append(Evidence(owner.path, binding.line, f"`self.{expr[2]}` is bound here"))
            return owner.path, binding.expr, ctx.cls
        if expr[0] not in ("n", "g", "a"):
            return None
        found_name = self.index.lookup_dotted(ctx.path, expr)
        if found_name is None:
            return None
        kind, value = found_name
        if kind == "const":
            path, binding = value  # type: ignore[misc]
            ctx.evidence.append(Evidence(path, binding.line, f"`{binding.name}` is defined here"))
            return path, binding.expr, None
        if kind == "attr":
            klass_ref, attr = value  # type: ignore[misc]
            klass = self.index.klass(klass_ref)
            for binding in klass.constants if klass else ():
                if binding.name == attr:
                    ctx.evidence.append(
                        Evidence(klass_ref.path, binding.line, f"`{klass_ref.name}.{attr}` is defined here")
                    )
                    return klass_ref.path, binding.expr, None
        return None

    def eval_str(self, expr: Expr, ctx: _Ctx, depth: int = 0) -> list[tuple[object, ...]]:
        """Alternatives of a string, each a tuple of literal parts and HOLE/PREFIX/PARAM markers."""
        if depth > _MAX_DEPTH:
            return [(HOLE,)]
        kind = expr[0]
        if kind == "s":
            return [(expr[1],)]
        if kind == "p":
            return [(PARAM,)]
        if kind == "j":
            options = [self.eval_str(part, ctx, depth + 1) for part in expr[1]]
            combined = [tuple(p for alt in combo for p in alt) for combo in product(*options)]
            return combined[:_MAX_ALTERNATIVES] if len(combined) <= _MAX_ALTERNATIVES else [(HOLE,)]
        if kind == "or":
            return [alt for option in expr[1] for alt in self.eval_str(option, ctx, depth + 1)][
                :_MAX_ALTERNATIVES
            ]
        if kind == "c":
            return self._eval_call(expr, ctx, depth)
        found = self._constant(expr, ctx)
        if found is not None:
            path, bound, cls = found
            return self.eval_str(bound, _Ctx(path, cls, ctx.evidence), depth + 1)
        return [(HOLE,)]

    def _eval_call(self, expr: Expr, ctx: _Ctx, depth: int) -> list[tuple[object, ...]]:
        """A string some call returns: a configured route wrapper keeps its path argument behind
        a prefix; `os.path.join`/`posixpath.join` join; a project function is read from its body."""
        callee, args, kwargs = expr[1], expr[2], expr[3]
        name = callee[2] if callee[0] in ("a", "g") else callee[1] if callee[0] == "n" else None
        if name in self.settings.route_wrappers:
            first = args[0] if args else dict(kwargs).get("url_path")
            if first is None:
                return [(PREFIX,)]
            return [(PREFIX, *alt) for alt in self.eval_str(first, ctx, depth + 1)]
        if callee[0] in ("n", "g", "a") and self.index.lookup_dotted(ctx.path, callee) in _PATH_JOINS:
            return self._path_join(args, ctx, depth)
        returned = self._returned(expr, ctx)
        if returned is None:
            return [(HOLE,)]
        value, inner = returned
        return self.eval_str(value, inner, depth + 1)

    def _path_join(self, args: tuple[Expr, ...], ctx: _Ctx, depth: int) -> list[tuple[object, ...]]:
        """`posixpath.join`: a `/` between parts, and an absolute part starts over."""
        joined: list[tuple[object, ...]] = [()]
        for arg in args:
            combined = []
            for alternative in self.eval_str(arg, ctx, depth + 1):
                alternative = tuple(part for part in alternative if part != "")
                head = alternative[0] if alternative else ""
                absolute = isinstance(head, str) and head.startswith("/")
                for prefix in joined:
                    if absolute or not prefix:
                        combined.append(alternative)
                    elif isinstance(prefix[-1], str) and prefix[-1].endswith("/"):
                        combined.append(prefix + alternative)
                    else:
                        combined.append((*prefix, "/", *alternative))
            if len(combined) > _MAX_ALTERNATIVES:
                return [(HOLE,)]
            joined = combined
        return joined

    def _returned(self, expr: Expr, ctx: _Ctx) -> tuple[Expr, _Ctx] | None:
        """What a call of a project function or method returns, in the caller's terms: its return
        expressions with the parameters bound to the call's arguments."""
        callee = expr[1]
        target = self._function_target(callee, ctx)
        if target is None:
            return None
        ref, via_self = target
        function = self.index.function(ref)
        if function is None or function.returns == UNKNOWN:
            return None
        kwargs, _ = _expand_kwargs(expr[3])
        args = tuple(_globalise(a, ctx.path) for a in expr[2])
        bindings = _bind_params(
            function, args, {k: _globalise(v, ctx.path) for k, v in kwargs.items()}, skip_self=via_self
        )
        value = _qualify(inline(function.returns, function.locals), bindings, ref.path)
        owner = ctx.cls if via_self else ClassRef(ref.path, ref.owner) if ref.owner else None
        return value, _Ctx(ref.path, owner, ctx.evidence)

    def eval_server(self, expr: Expr, ctx: _Ctx, depth: int = 0) -> list[tuple[str, str | None]]:
        """Alternatives of a server name: ("self", None), ("ref", key), ("lit", text), ("param", None),
        ("unknown", None)."""
        if depth > _MAX_DEPTH:
            return [("unknown", None)]
        kind = expr[0]
        if kind == "or":
            return [alt for option in expr[1] for alt in self.eval_server(option, ctx, depth + 1)]
        if kind == "p":
            return [("param", None)]
        if kind == "a" and expr[2] == "name":
            owner = expr[1]
            if owner == ("a", SELF, "config"):
                return [("self", None)]
            if owner[0] == "a" and owner[1] == ("a", SELF, "config"):
                return [("ref", owner[2])]
        if kind in ("s", "j"):
            alternatives = self.eval_str(expr, ctx, depth + 1)
            return [_literal(alt) for alt in alternatives]
        if kind == "c":
            returned = self._returned(expr, ctx)
            if returned is not None:
                return self.eval_server(returned[0], returned[1], depth + 1)
        found = self._constant(expr, ctx)
        if found is not None:
            path, bound, cls = found
            return self.eval_server(bound, _Ctx(path, cls, ctx.evidence), depth + 1)
        if kind == "a" and expr[1][0] == "a" and expr[1][1] == SELF and ctx.cls is not None:
            # self.<attr>.name where <attr> was bound to self.config (an alias kept on the instance)
            found_attr = self.index.class_binding(ctx.cls, expr[1][2])
            if found_attr and found_attr[1].expr == ("a", SELF, "config"):
                ctx.evidence.append(
                    Evidence(found_attr[0].path, found_attr[1].line, f"`self.{expr[1][2]}` is bound here")
                )
                return self.eval_server(("a", ("a", SELF, "config"), expr[2]), ctx, depth + 1)
        return [("unknown", None)]

    # findings ----------------------------------------------------------------------------
    def classify(
        self, call: ClientCall, site_cls: ClassRef, site_path: str
    ) -> tuple[str, str, list[Evidence]] | None:
        """(code, detail, evidence) for a client call inside an agent's code, or None."""
        ctx = _Ctx(site_path, site_cls)
        servers = self.eval_server(call.server, ctx)
        paths = self.eval_str(call.path, ctx)
        if any(kind == "param" for kind, _ in servers) or any(PARAM in alt for alt in paths):
            return None  # a forwarding helper: its callers are checked instead
        evidence: list[Evidence] = list(call.via)
        running = self.instances_running(site_cls)
        verdicts = []
        for kind, value in servers:
            if kind == "self":
                verdicts.append("self")
            elif kind == "ref":
                back = [(i, r) for i in running for r in i.self_refs() if r.key == value]
                verdicts.append("self" if back else "other")
                for instance, ref in back:
                    evidence.append(
                        Evidence(
                            ref.where.path,
                            ref.where.line,
                            f"instance `{instance.name}` routes `{value}` back to itself",
                        )
                    )
            elif kind == "lit":
                bound = [i for i in running if i.name == value]
                verdicts.append("self" if bound else "other")
                for instance in bound:
                    evidence.append(
                        Evidence(
                            instance.where.path, instance.where.line, f"instance `{value}` runs this agent"
                        )
                    )
            else:
                verdicts.append("unknown")
        routes = self.own_routes(site_cls)
        family = self.responses_routes(site_cls)
        reached = [_reachable(alt, routes) for alt in paths]
        method = call.http_method
        is_post = method == ("s", "POST") or (method[0] == "s" and method[1].upper() == "POST")
        if "self" not in verdicts and "unknown" not in verdicts:
            return None
        main = self.settings.route.split("?")[0]
        if not all(v == "self" for v in verdicts):
            if any(r and r <= family and _has_text(alt) for alt, r in zip(paths, reached)):
                return "SCA003", f"the server name posting to {main} cannot be resolved statically", evidence
            return None
        # The target is the agent's own server: a self-call whatever the path.
        if any(kind == "self" for kind, _ in servers):
            evidence.extend(
                Evidence(i.where.path, i.where.line, f"instance `{i.name}` runs this agent") for i in running[:3]
            )
        evidence.extend(Evidence(site_path, line, f"`{name}` is bound here") for name, line in call.site.aliases)
        evidence.extend(e for e in ctx.evidence if e not in evidence)
        if all(r and r <= family for r in reached):
            if is_post:
                return "SCA001", main, evidence
            if method[0] == "s":
                return "SCA002", f"{method[1].upper()} {main}", evidence
            return "SCA003", f"its own {main} with a method that cannot be resolved", evidence
        if all(HOLE not in alt for alt in paths):
            names = [sorted(r - family) or [_path_text(alt)] for alt, r in zip(paths, reached)]
            found = list(dict.fromkeys(name for group in names for name in group))
            sources = self._route_sources[site_cls]
            evidence.extend(sources[route] for route in found if route in sources)
            return "SCA002", " or ".join(found), evidence
        shown = " or ".join(dict.fromkeys(_path_text(alt) for alt in paths))
        return "SCA002", f"{shown} (a path that cannot be resolved statically)", evidence

    def findings_in(self, path: str) -> list[Finding]:
        module = self.index.module(path)
        if module is None:
            return []
        # One finding per call site and code, even when the site reaches the client along
        # several routes (a helper posting twice, a callee chosen by a flag): their evidence merges.
        results: dict[tuple[int, int, str], Finding] = {}
        for klass in module.classes:
            ref = ClassRef(path, klass.name)
            agent = self.agent_using(ref)
            if agent is None:
                continue
            agent_name = agent.name
            for method in klass.methods:
                for call in self.client_calls(method, FunctionRef(path, klass.name, method.name), ref):
                    verdict = self.classify(call, ref, path)
                    if verdict is None:
                        continue
                    code, detail, evidence = verdict
                    if code == "SCA001" and call.blocker is None:
                        call = replace(call, blocker=self._other_target_somewhere(call, ref, path))
                    finding = self._finding(code, detail, evidence, call, path, agent_name, method.name)
                    key = (finding.line, finding.column, finding.code)
                    if key in results:
                        first = results[key]
                        finding = replace(
                            first,
                            evidence=tuple(dict.fromkeys(first.evidence + finding.evidence)),
                            fixable=first.fixable and finding.fixable,
                            fix_blocker=first.fix_blocker or finding.fix_blocker,
                        )
                    results[key] = finding
        return list(results.values())

    def _other_target_somewhere(self, call: ClientCall, site_cls: ClassRef, site_path: str) -> str | None:
        """Why an in-process rewrite would be wrong: a name from YAML (a literal instance name,
        `self.config.<ref>.name`) that is this agent in some of its instances but another server
        in others."""
        running = self.instances_running(site_cls)
        for kind, value in self.eval_server(call.server, _Ctx(site_path, site_cls)):
            if kind == "lit":
                others = [i.name for i in running if i.name != value]
            elif kind == "ref":
                others = [i.name for i in running if not any(r.key == value for r in i.self_refs())]
            else:
                continue
            if others:
                names = ", ".join(f"`{name}`" for name in sorted(set(others))[:3])
                return f"in other instances ({names}) the target is another server: a rewrite would skip it"
        return None

    def _finding(
        self,
        code: str,
        detail: str,
        evidence: list[Evidence],
        call: ClientCall,
        path: str,
        agent: str,
        method: str,
    ) -> Finding:
        rule = RULES[code]
        if code == "SCA003":
            message = rule.message.format(agent=agent, method=method, reason=detail)
        else:
            message = rule.message.format(agent=agent, method=method, route=detail)
        config_refs = [e for e in evidence if "routes `" in e.note]
        if config_refs:
            message += f" ({config_refs[0].note} in {config_refs[0].path})"
        site = call.site
        fixable = code == "SCA001" and call.blocker is None
        return Finding(
            code=code,
            path=path,
            line=site.line,
            column=site.col,
            end_line=site.end_line,
            end_column=site.end_col,
            message=message,
            agent=agent,
            method=method,
            fixable=fixable,
            evidence=tuple(dict.fromkeys(evidence)),
            fix_blocker=None if fixable or code != "SCA001" else call.blocker,
        )


def _literal(alternative: tuple[object, ...]) -> tuple[str, str | None]:
    if PARAM in alternative:
        return ("param", None)
    if all(isinstance(part, str) for part in alternative):
        return ("lit", "".join(alternative))  # type: ignore[arg-type]
    return ("unknown", None)


def _normal_route(template: str) -> str:
    """A route template without query string or rollout prefix: the twins are one route."""
    return _ROLLOUT_PREFIX.sub("", template.split("?")[0])


def _path_text(alternative: tuple[object, ...]) -> str:
    """A path alternative as a user reads it: unknown parts shown as `{?}`."""
    text = "".join(part if isinstance(part, str) else "{?}" for part in alternative if part != PREFIX)
    return text or "{?}"


def _has_text(alternative: tuple[object, ...]) -> bool:
    return any(isinstance(part, str) and part for part in alternative)


def _reachable(alternative: tuple[object, ...], routes: Iterable[str]) -> frozenset[str]:
    """The own routes (normalised templates) a path alternative may reach: unknown parts match
    as wildcards, a rollout prefix and a query string are ignored."""
    parts = [part for part in alternative if part != PREFIX]
    text = "".join(part if isinstance(part, str) else "\x00" for part in parts).split("?")[0]
    text = _ROLLOUT_PREFIX.sub("", text)
    tokens = [None if char == "\x00" else char for char in text]
    return frozenset(template for template in routes if _may_match(tokens, _template_tokens(template)))


def _template_tokens(template: str) -> list[str | None]:
    """A route template as characters, None standing for a `{param}` (one or more non-`/`)."""
    return [None if piece.startswith("{") else piece for piece in re.findall(r"\{[^}]*\}|[^{]", template)]


def _may_match(path: list[str | None], template: list[str | None]) -> bool:
    """Can one string match both a path with unknown parts (None: any text, `/` included) and a
    route template (None: one or more characters other than `/`)? A search over position pairs."""
    start = (0, 0, False)  # path index, template index, inside a template parameter
    seen = {start}
    stack = [start]
    while stack:
        i, j, in_param = stack.pop()
        if i == len(path) and j == len(template) and not in_param:
            return True
        moves = []
        if in_param:
            moves.append((i, j + 1, False))  # the parameter ends
        if i < len(path) and path[i] is None:
            moves.append((i + 1, j, in_param))  # the unknown part ends
            if j < len(template):
                if template[j] is None:
                    moves.append((i, j, True))
                else:
                    moves.append((i, j + 1, False))
        elif i < len(path) and j < len(template):
            char = path[i]
            if template[j] is None:
                if char != "/":
                    moves.append((i + 1, j, True))
            elif template[j] == char and not in_param:
                moves.append((i + 1, j + 1, False))
        for move in moves:
            if move not in seen:
                seen.add(move)
                stack.append(move)
    return False
