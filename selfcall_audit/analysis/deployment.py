"""Deployment: which YAML instances run an agent class, and which routes its server registers."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

from ..config import Settings
from ..ftypes import Evidence
from ..workspace.prefilter import word_matcher
from .arguments import expand_kwargs
from .calls import ROUTE_METHODS
from .evaluate import Ctx, Evaluator
from .expr import UNKNOWN, Attr, Call, Expr, SelfRef, Str
from .facts import CallFact, FunctionFacts
from .gym_config import AgentInstance
from .hierarchy import Hierarchy
from .index import ClassRef

_MODEL_ROUTE = "/v1/chat/completions"  # served by model servers, which serve `/v1/responses` too
_ROLLOUT_PREFIX = re.compile(r"^/ng-rollout/[^/]+(?:/training-token-capture)?(?=/)")


def normal_route(template: str) -> str:
    """A route template without query string or rollout prefix: the twins are one route."""
    return _ROLLOUT_PREFIX.sub("", template.split("?")[0])


class Deployment:
    def __init__(
        self,
        hierarchy: Hierarchy,
        evaluator: Evaluator,
        settings: Settings,
        instances: list[AgentInstance] | Callable[[], list[AgentInstance]],
        read: Callable[[str], bytes | None] | None = None,
        mentions: Callable[[frozenset[str], str], bool] | None = None,
    ):
        """`mentions(names, path)`: does the file name one of the names as a word? (a long-lived
        process keeps the answers; by default the file is read and searched)."""
        self.hierarchy = hierarchy
        self.index = hierarchy.index
        self.evaluator = evaluator
        self.settings = settings
        self._instances = instances  # a callable: read when first needed (YAML is indexed meanwhile)
        self.read = read
        self.mentions = mentions
        self._served_memo: dict[str, list[ClassRef]] = {}
        self._running: dict[ClassRef, list[AgentInstance]] = {}
        self._mapped_all = False
        self._routes_memo: dict[ClassRef, dict[str, str | None]] = {}
        self.route_sources: dict[ClassRef, dict[str, Evidence]] = {}
        self._serves_memo: dict[ClassRef, tuple[str, int] | None] = {}
        self._entries: set[str] | None = None  # the entrypoints of the instances that are project files

    @property
    def instances(self) -> list[AgentInstance]:
        if callable(self._instances):
            self._instances = self._instances()
        return self._instances

    # instances ------------------------------------------------------------------------------
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
                    if isinstance(found, ClassRef):
                        served.append(found)
                if not served:
                    served = [
                        ClassRef(entry, k.name)
                        for k in module.classes
                        if self.hierarchy.is_agent(ClassRef(entry, k.name))
                    ]
            self._served_memo[entry] = served
        return self._served_memo[entry]

    def instances_running(self, ref: ClassRef) -> list[AgentInstance]:
        """YAML instances whose served class runs the code of `ref`, those serving `ref` itself
        first (a finding names a few: for a method of `ref`, its own instances before its
        subclasses', see `_own_first`).

        A scoped run loads only the entrypoint modules that name `ref` or one of its subclasses:
        a one-file run must not decode every agent of the project.
        """
        if ref in self._running:
            return self._running[ref]
        if self.hierarchy.find_subclasses is None:  # a whole-project run: map every entrypoint once
            if not self._mapped_all:
                self._mapped_all = True
                running: dict[ClassRef, dict[AgentInstance, None]] = {}
                for instance in self.instances:
                    for served in self.served_classes(instance):
                        for owner in self.hierarchy.mro(served):
                            running.setdefault(owner, {})[instance] = None
                self._running.update(
                    (owner, self._own_first(owner, found)) for owner, found in running.items()
                )
            return self._running.get(ref, [])
        names = {ref.name, *(c.name for c in self.hierarchy.descendants(ref))}
        if self._entries is None:  # many instances share an entrypoint: each is looked at once
            self._entries = {i.entrypoint for i in self.instances if i.entrypoint in self.index.py_files}
        entries = self._entries
        loaded: set[str] = set()
        while True:
            named = self._naming(names)
            new = [e for e in entries - loaded if e == ref.path or named(e)]
            if not new:
                break
            for entry in new:
                loaded.add(entry)
                for served in self._served_in(entry):
                    mro = self.hierarchy.mro(served)
                    if ref in mro:
                        names.update(c.name for c in mro[: mro.index(ref)])
        running_entries = {e for e in loaded if any(ref in self.hierarchy.mro(s) for s in self._served_in(e))}
        found_running = self._own_first(ref, [i for i in self.instances if i.entrypoint in running_entries])
        self._running[ref] = found_running
        return found_running

    def _own_first(self, ref: ClassRef, instances: Iterable[AgentInstance]) -> list[AgentInstance]:
        """Those serving `ref` itself first, and among equals those configured in their agent's own
        folder (another agent's configs may run it too)."""
        return sorted(
            instances,
            key=lambda i: (ref not in self.served_classes(i), not i.where.path.startswith(f"{i.agent_dir}/")),
        )

    def _naming(self, names: set[str]) -> Callable[[str], bool]:
        """A predicate: does the file name one of `names` as a word?"""
        if self.mentions is not None:
            return functools.partial(self.mentions, frozenset(names))
        matcher, read = word_matcher(names), self.read
        return lambda path: read is not None and matcher(read(path))

    # routes ---------------------------------------------------------------------------------
    def own_routes(self, ref: ClassRef) -> dict[str, str | None]:
        """Routes the agent serves, by normalised template, each with the name of the method that
        handles it (None when not known); where code registers one is kept as evidence."""
        if ref not in self._routes_memo:
            routes: dict[str, str | None] = dict.fromkeys(
                normal_route(t) for t in (self.settings.route, *self.settings.own_routes)
            )
            sources: dict[str, Evidence] = {}
            for owner in self.hierarchy.mro(ref):
                klass = self.index.klass(owner)
                for method in klass.methods if klass else ():
                    for call in self.evaluator.calls_of(method):
                        for text, handler in self._registered_route(call, method, Ctx(owner.path, owner)):
                            normal = normal_route(text)
                            if routes.get(normal) is None:
                                routes[normal] = handler
                            sources.setdefault(normal, Evidence(owner.path, call.line, "registered", text))
            self._routes_memo[ref] = routes
            self.route_sources[ref] = sources
        return self._routes_memo[ref]

    def serves_agent_route(self, ref: ClassRef) -> tuple[str, int] | None:
        """Where the class's own server setup registers the agent route (`/v1/responses`), unless
        it also registers a model server's chat route: an agent known by what it serves."""
        if ref not in self._serves_memo:
            klass = self.index.klass(ref)
            main, found, model = normal_route(self.settings.route), None, False
            telling = {main, _MODEL_ROUTE}
            for method in klass.methods if klass else ():
                # most registrations name a literal route that is neither: nothing to evaluate
                if not any(
                    _may_register(c) and (_route_text(c) is None or normal_route(_route_text(c)) in telling)
                    for c in method.calls
                ):
                    continue
                for call in self.evaluator.calls_of(method):
                    if not _may_register(call):
                        continue
                    for text, _ in self._registered_route(call, method, Ctx(ref.path, ref)):
                        model = model or normal_route(text) == _MODEL_ROUTE
                        if found is None and normal_route(text) == main:
                            found = (ref.path, call.line)
            self._serves_memo[ref] = None if model else found
        return self._serves_memo[ref]

    def responses_routes(self, ref: ClassRef) -> frozenset[str]:
        """The agent's own routes that reach its `/v1/responses` handler: the route itself and any
        other route registered with the same handler (a suffixed or prefixed twin)."""
        routes = self.own_routes(ref)
        main = normal_route(self.settings.route)
        handler = routes.get(main)
        return frozenset(t for t, h in routes.items() if t == main or (handler is not None and h == handler))

    def _registered_route(
        self, call: CallFact, function: FunctionFacts, ctx: Ctx
    ) -> list[tuple[str, str | None]]:
        """`app.post("/path")(handler)`, `app.add_api_route("/path", handler)`: routes the agent
        serves, with the name of their handler when it is a method of the agent."""
        handler: Expr = UNKNOWN
        match call.func:
            case Call(Attr(_, method) as func, args, raw_kwargs) if method in ROUTE_METHODS:
                # the outer call of `app.post(path)(handler)`: a registration, whatever `app` is
                # (a parameter too: `def setup_routes(self, app)`)
                outer_args, _ = self.evaluator.arguments_of(call, function)
                handler = outer_args[0] if outer_args else UNKNOWN
            case Attr(_, method) as func if method in ROUTE_METHODS:
                args, raw_kwargs = self.evaluator.arguments_of(call, function)
            case _:
                return []
        kwargs, _ = expand_kwargs(raw_kwargs)
        client = handler == UNKNOWN and self.evaluator.is_client(func.base, ctx)
        if "server_name" in kwargs or client or not args:
            return []
        if func.attr == "add_api_route":
            handler = args[1] if len(args) > 1 else kwargs.get("endpoint", UNKNOWN)
        name = _handler_method(handler)
        found = []
        for alternative in self.evaluator.path(args[0], ctx):
            if all(isinstance(part, str) for part in alternative):
                text = "".join(alternative)  # type: ignore[arg-type]
                if text.startswith("/"):
                    found.append((text, name))
        return found


def _may_register(call: CallFact) -> bool:
    """A call of a route method (`app.post(...)`, `app.post(...)(handler)`), before inlining."""
    func = call.func.func if isinstance(call.func, Call) else call.func
    return isinstance(func, Attr) and func.attr in ROUTE_METHODS


def _route_text(call: CallFact) -> str | None:
    """The route a registration names as a literal (`app.post("/verify")`), None otherwise."""
    args = call.func.args if isinstance(call.func, Call) else call.args
    return args[0].text if args and isinstance(args[0], Str) else None


def _handler_method(handler: Expr) -> str | None:
    """The agent method a registered handler runs: `self.responses`, or one wrapped by a call
    (`traced_endpoint(..., self.responses, ...)`, a `functools.wraps(self.responses)` closure)."""
    pending = [handler]
    while pending:
        expr = pending.pop(0)
        match expr:
            case Attr(SelfRef(), name):
                return name
            case Call(func, args, kwargs):
                pending.extend(args)
                pending.extend(value for _, value in kwargs)
                if isinstance(func, Call):
                    pending.append(func)
    return None
