"""Findings: the stages put together for the classes of one module.

hierarchy (agents, MRO) → deployment (instances, own routes) → call expansion (client calls,
through helpers and partials) → evaluation (target names, paths) → classification (rule) →
a finding, with a typed description of its call for `fix`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ..config import Settings
from ..ftypes import Blocker, CallArgument, CallDescription, CallReceiver, Evidence, Finding, LocalBinding
from ..rules import SELF_CALL
from . import around, policy
from .calls import ROUTING_KWARGS
from .classify import Classifier, Verdict
from .deployment import Deployment
from .evaluate import Evaluator
from .expand import ClientCall, Expander
from .expr import NONE, UNKNOWN, Attr, SelfRef
from .facts import ClassFacts, FunctionFacts, Inlined
from .gym_config import AgentInstance
from .hierarchy import Hierarchy
from .index import ClassRef, FunctionRef
from .values import ConfigRef, NamedServer


class Resolver:
    def __init__(
        self,
        hierarchy: Hierarchy,
        settings: Settings,
        instances: list[AgentInstance] | Callable[[], list[AgentInstance]],
        read: Callable[[str], bytes | None] | None = None,
        mentions: Callable[[frozenset[str], str], bool] | None = None,
        sites: dict[str, around.Sites] | None = None,
        inlined: Inlined | None = None,
        parsed: Collection[str] = (),
    ):
        """`sites`: the method parts of each file's self-call sites, kept by a long-lived process
        from one run to the next (see `around.Sites`); each file's are replaced by this run's;
        `inlined`: this run's inlined calls, from the last run's (see `facts.Inlined`); `parsed`:
        the files this process has just parsed whole (an edited buffer), whose tree `parsing.parse`
        still holds: their sites are read on it rather than on their methods' lines parsed again."""
        self.hierarchy = hierarchy
        self.index = hierarchy.index
        self.settings = settings
        self.evaluator = Evaluator(hierarchy, settings, inlined)
        self.deployment = Deployment(hierarchy, self.evaluator, settings, instances, read, mentions)
        self.expander = Expander(self.evaluator, read)
        self.classifier = Classifier(self.evaluator, self.deployment, settings)
        self.read = read
        # the trees of the file with a self-call `fix` may rewrite: its own, its methods' (by their lines)
        self._trees: dict[str, dict[tuple[int, int] | None, around.Tree | None]] = {}
        self.sites = sites
        self.parsed = parsed
        self._readers: dict[str, tuple[str, ...]] = {}
        if hierarchy.serves is None:  # agents are known by the routes they serve, too
            hierarchy.serves = self.deployment.serves_agent_route

    @property
    def posters(self) -> dict[str, bool]:
        """Files asked whether they could hold a helper that posts, and the answer."""
        return self.expander.posters

    @property
    def cut(self) -> dict[str, str]:
        """Files where a chain of helpers was not followed further (the limit), and the helper."""
        return self.expander.cut

    def served_classes(self, instance: AgentInstance) -> list[ClassRef]:
        return self.deployment.served_classes(instance)

    def findings_in(self, path: str, only: tuple[ClassRef, ...] | None = None) -> list[Finding]:
        """The module's findings, as a whole run reports them. `only`: agents whose evaluation
        alone can make a finding there matter (a run on some files, for a base of their agents);
        when none of them finds one, none is looked for with the project's other agents."""
        module = self.index.module(path)
        if module is None or (only is not None and not self._found_with(path, module.classes, only)):
            self._trees.pop(path, None)
            return []
        # One finding per call site and code, even when the site reaches the client along
        # several routes (a helper posting twice, a callee chosen by a flag): their evidence merges.
        results: dict[tuple[int, int, str], Finding] = {}
        for klass in module.classes:
            ref = ClassRef(path, klass.name)
            # each method is evaluated with `self` as each agent that runs it (the class itself
            # when it is one): constants, overrides and stored attributes are that agent's
            for agent in self.hierarchy.agents_using(ref):
                for finding in self._findings_for(klass.methods, ref, agent):
                    key = (finding.line, finding.column, finding.code)
                    if key in results:
                        first = results[key]
                        finding = first._replace(
                            evidence=tuple(dict.fromkeys(first.evidence + finding.evidence)),
                            fixable=first.fixable and finding.fixable,
                            fix_blocker=first.fix_blocker or finding.fix_blocker,
                            limit=first.limit or finding.limit,
                            call=first.call if first.fix_blocker or not finding.fix_blocker else finding.call,
                        )
                    results[key] = finding
        # No finding elsewhere is placed in this file: its tree goes now, not with the run (a cold
        # scan of NeMo Gym held 24 agent modules' trees at once, a fifth of its peak memory).
        self._trees.pop(path, None)
        return list(results.values())

    def _found_with(self, path: str, classes: tuple[ClassFacts, ...], agents: tuple[ClassRef, ...]) -> bool:
        """Does a class of the module hold a finding when `self` is one of `agents` running it?"""
        refs = [ClassRef(path, klass.name) for klass in classes]
        return any(
            ref in self.hierarchy.mro(agent) and self._findings_for(klass.methods, ref, agent)
            for agent in agents
            for klass, ref in zip(classes, refs, strict=True)
        )

    def _findings_for(
        self, methods: tuple[FunctionFacts, ...], ref: ClassRef, agent: ClassRef
    ) -> list[Finding]:
        """The findings of a class's methods when `self` is `agent`."""
        found = []
        for method in methods:
            fref = FunctionRef(ref.path, ref.name, method.name)
            for call in self.expander.client_calls(method, fref, agent):
                verdict = self.classifier.classify(call, agent, ref.path)
                if verdict is None:
                    continue
                if agent != ref:
                    klass = self.index.klass(agent)
                    runs_in = Evidence(agent.path, klass.line if klass else 1, "runs_in", agent.name)
                    verdict = verdict._replace(evidence=(*verdict.evidence, runs_in))
                found.append(self._finding(verdict, call, method, ref, agent))
        return found

    def _finding(
        self, verdict: Verdict, call: ClientCall, method: FunctionFacts, site_cls: ClassRef, agent: ClassRef
    ) -> Finding:
        code = verdict.code
        description = None
        if code == SELF_CALL:
            description = describe(call, method)._replace(readers=self._readers_of(site_cls.path))
            blocker = (
                policy.blocker(description)
                or self._other_target_somewhere(verdict, agent)
                or self._helper_overridden(call, agent)
                or self._app_not_recorded(agent)
                or self._wrapper_overridden(site_cls.path, call, method.span, agent)
            )
            at_site = None if blocker else self._at_site(site_cls.path, call, description, method.span)
            description = description._replace(blocker=blocker, at_site=at_site)
        site = call.site
        return Finding(
            code=code,
            path=site_cls.path,
            line=site.line,
            column=site.col,
            end_line=site.end_line,
            end_column=site.end_col,
            agent=agent.name,
            method=method.name,
            fixable=description is not None and description.blocker is None and description.at_site is None,
            evidence=verdict.evidence,
            fix_blocker=(description.blocker or description.at_site) if description else None,
            call=description,
            config=verdict.config,
            routes=verdict.routes,
            http_method=verdict.http_method,
            unresolved=verdict.unresolved,
            doubt=verdict.doubt,
            limit=verdict.limit,
        )

    def _helper_overridden(self, call: ClientCall, agent: ClassRef) -> Blocker | None:
        """Why a forwarding helper cannot be seen through at this call: an agent deriving from
        `agent` defines the method otherwise, and runs the call with its own."""
        if call.helper is None or call.helper_facts is None or call.helper_facts.forwards is None:
            return None
        for current in self.hierarchy.descendants(agent):
            found = self.hierarchy.method(current, call.helper)
            if self.hierarchy.is_agent(current) and found is not None and found[1] != call.helper_facts:
                return Blocker("helper_overridden", call.helper, names=(current.name,))
        return None

    def _readers_of(self, path: str) -> tuple[str, ...]:
        """How the module names NeMo Gym's readers of a response (`policy.reader_spellings`)."""
        if path not in self._readers:
            module = self.index.module(path)
            imports = [(i.local, i.module, i.name, i.level) for i in module.imports] if module else []
            bound = {local for local, *_ in imports if self.index.defines(path, local)}
            self._readers[path] = policy.reader_spellings(imports, bound)
        return self._readers[path]

    def _wrapper_overridden(
        self, path: str, call: ClientCall, span: tuple[int, int], agent: ClassRef
    ) -> Blocker | None:
        """Why the response, coming back through one of NeMo Gym's wrappers, is not followed: an
        agent running the call (`agent` or one deriving from it) has that wrapper from a class of
        the project, which may do anything with it. The agents' classes decide it, not the tree
        around the call alone, so `fix` does not read it again."""
        overridden: dict[str, str] = {}
        for current in self._running(agent):
            for name in sorted(policy.RESPONSE_WRAPPERS):
                found = self.hierarchy.method(current, name)
                if found is not None and not policy.nemo_gyms(
                    self.index.qualname(found[0]), self.hierarchy.agent_bases
                ):
                    overridden.setdefault(name, found[0].name)
        if not overridden:  # the usual answer, without the tree
            return None
        line, column = call.site.line, call.site.col
        tree = self._tree_at(path, span, line, column)
        return (
            None
            if tree is None
            else policy.overridden_wrapper(around.wrappers_at(tree, line, column), overridden)
        )

    def _running(self, agent: ClassRef) -> list[ClassRef]:
        """The agents that run a call of `agent`'s code: itself and each agent deriving from it."""
        return [c for c in [agent, *self.hierarchy.descendants(agent)] if self.hierarchy.is_agent(c)]

    def _app_not_recorded(self, agent: ClassRef) -> Blocker | None:
        """Why the helper would find no app: an agent running the call (`agent` or one deriving
        from it) builds its app in a `setup_webserver` of its own, which neither starts from the
        agent base's (where `fix` records the app) nor records the app itself."""
        for current in self._running(agent):
            found = self.hierarchy.method(current, policy.APP_BUILDER)
            if found is None:
                continue
            owner, method = found
            klass = self.index.klass(owner)
            recorded = klass is not None and any(b.name == policy.APP_ATTRIBUTE for b in klass.instance_attrs)
            if not (
                recorded or self.index.qualname(owner) in self.hierarchy.agent_bases or _builds_on(method)
            ):
                return Blocker("app_not_recorded", owner.name, method.line)
        return None

    def _at_site(
        self, path: str, call: ClientCall, description: CallDescription, span: tuple[int, int]
    ) -> Blocker | None:
        """Why the call cannot be rewritten where it stands, as `fix` would find it (see `around`):
        asked of the tree of the method's lines (`span`), and of the module's when that does not
        hold the call, the answer depends on more of the module, or the module's is at hand."""
        line, column, helper = call.site.line, call.site.col, self.settings.helper
        tree = self._tree_at(path, span, line, column)
        if tree is None:
            return None
        answer = around.site_blocker(tree, line, column, description, helper, self._sites(path))
        if tree.read_module:  # the method's lines alone did not hold the answer
            tree = self._tree(path, None)
            return (
                None
                if tree is None
                else around.site_blocker(tree, line, column, description, helper, self._sites(path))
            )
        return answer

    def _tree_at(self, path: str, span: tuple[int, int], line: int, column: int) -> around.Tree | None:
        """The tree a question about the call at `line`:`column` is asked of: the tree of its
        method's lines (`span`) when they hold it and the file's tree is not at hand, else the
        file's; None if it cannot be had."""
        method = self._tree(path, span) if span != (0, 0) and path not in self.parsed else None
        if method is not None and method.call_at(line, column) is not None:
            return method
        return self._tree(path, None)

    def _sites(self, path: str) -> around.Sites | None:
        """This run's kept method parts of the file's sites (a long-lived process), once `_tree`
        has started them from the last run's."""
        return self.sites.get(path) if self.sites is not None else None

    def _tree(self, path: str, span: tuple[int, int] | None) -> around.Tree | None:
        """The file's tree (`span` None), or the tree of a method's lines; None if it cannot be had."""
        if path not in self._trees and self.sites is not None:  # this run's entries, from the last's
            self.sites[path] = around.Sites(self.sites.get(path))
        trees = self._trees.setdefault(path, {})
        if span not in trees:
            source = self.read(path) if self.read is not None else None
            try:
                trees[span] = around.Tree(source, span) if source is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                trees[span] = None
        return trees[span]

    def _other_target_somewhere(self, verdict: Verdict, site_cls: ClassRef) -> Blocker | None:
        """Why an in-process rewrite would be wrong: a name from YAML (a literal instance name,
        `self.config.<ref>.name`) that is this agent in some of its instances but another server
        in others."""
        running = self.deployment.instances_running(site_cls)
        for server in verdict.servers:
            match server:
                case NamedServer(text):
                    others = [i.name for i in running if i.name != text]
                case ConfigRef(key):
                    others = [i.name for i in running if not any(r.key == key for r in i.self_refs)]
                case _:
                    continue
            if others:
                return Blocker("other_instances", names=tuple(sorted(set(others))[:3]))
        return None


def _builds_on(method: FunctionFacts) -> bool:
    """Does the method call another class's method of its name (`super().setup_webserver()`)?"""
    return any(
        isinstance(call.func, Attr)
        and call.func.attr == method.name
        and not isinstance(call.func.base, SelfRef)
        for call in method.calls
    )


def describe(call: ClientCall, method: FunctionFacts) -> CallDescription:
    """The call as written at its site, in the terms the rewrite policy uses."""
    site = call.site
    client_method = call.client_method
    callee = site.callee or ""
    forwarded: dict[str, str] = {}  # a forwarding helper's parameter → the client keyword it fills
    if call.helper is not None:
        receiver = CallReceiver("helper", client_method, call.helper)
        facts = call.helper_facts
        if facts is not None and facts.forwards is not None:
            forwarded = {param: keyword for keyword, param in facts.forwards}
            receiver = receiver._replace(forwards=True, unpassed=_unpassed(facts, site.written))
    elif call.via_partial:
        receiver = CallReceiver("partial", client_method, callee)
    elif callee and "." not in callee:
        receiver = CallReceiver("bound_method", client_method, callee)
    elif callee.count(".") == 2 and callee.split(".")[0] == method.self_param:
        receiver = CallReceiver("self_attribute", client_method, callee)
    else:
        receiver = CallReceiver("alias", client_method, callee)
    arguments = []
    positional = 0
    texts = site.texts or ("",) * len(site.written)
    for index, ((keyword, star, keys), text) in enumerate(zip(site.written, texts, strict=True)):
        if star:
            if receiver.forwards and keys is not None and any(forwarded.get(k) != k for k in keys):
                keys = None  # kept as written only when the helper passes each key on under its own name
            arguments.append(CallArgument(index, "other", None, star, keys=keys))
            continue
        if receiver.forwards:  # by name only: a positional argument is one the helper gets as it is
            role = policy.role_of(client_method, 0, forwarded[keyword]) if keyword in forwarded else "other"
        else:
            role = policy.role_of(client_method, positional, keyword)
        arguments.append(CallArgument(index, role, keyword, text=text if role in ROUTING_KWARGS else ""))
        positional += keyword is None
    bindings = tuple(
        LocalBinding(name, line, _feeds(part, client_method)) for name, line, part in site.aliases
    )
    return CallDescription(
        receiver=receiver,
        arguments=tuple(arguments),
        bindings=bindings,
        self_name=method.self_param,
        context=site.context,  # type: ignore[arg-type]
    )


def _unpassed(helper: FunctionFacts, written: tuple) -> str:
    """A parameter the forwarding helper passes on that the call leaves to its default, when that
    default is not None (what the in-process helper assumes): the rewrite would not send it."""
    passed = {keyword for keyword, star, _ in written if keyword and not star}
    defaults = dict(helper.defaults)
    for _, param in helper.forwards or ():
        if param not in passed and defaults.get(param, UNKNOWN) != NONE:
            return param
    return ""


def _feeds(part: str, client_method: str) -> str:
    if part == "receiver":
        return part
    if part.startswith("#"):
        return policy.role_of(client_method, int(part[1:]), None)
    return "other" if part == "**" else policy.role_of(client_method, 0, part)
