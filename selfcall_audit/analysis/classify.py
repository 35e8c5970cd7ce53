"""Classification: is a client call a self-call, and which rule says so.

A call whose target is the agent's own server is a self-call whatever the path: SCA001 when the
path can only reach the agent's `/v1/responses` handler (matched against the routes the class
and its bases register, unknown parts matching as wildcards), SCA002 for any other path. SCA003
is a call whose target cannot be resolved with a path that can only be `/v1/responses`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from ..config import Settings
from ..ftypes import Evidence
from ..rules import OTHER_ROUTE, POSSIBLE_SELF_CALL, SELF_CALL
from .deployment import Deployment, normal_route
from .evaluate import Ctx, Evaluator
from .expand import ClientCall
from .gym_config import AgentInstance, ServerRef
from .index import ClassRef
from .values import (
    HOLE,
    PARAM,
    PREFIX,
    ConfigRef,
    FromParam,
    NamedServer,
    OwnName,
    Path,
    Server,
    names_route_itself,
    path_limit,
    server_limit,
    without_params,
)

if TYPE_CHECKING:
    from ..ftypes import Doubt


class Verdict(NamedTuple):
    """The rule a call breaks, with the finding's subject as data (see `Finding`)."""

    code: str
    routes: tuple[str, ...]  # the routes reached, or the paths as written
    evidence: tuple[Evidence, ...]
    servers: tuple[Server, ...]  # what the target name evaluated to
    config: Evidence | None = None  # the YAML reference that routes the target back to the agent
    http_method: str | None = None  # a call to the agent's route with another method than POST
    unresolved: bool = False  # the path cannot be resolved statically
    doubt: Doubt | None = None  # SCA003: what cannot be resolved
    limit: str | None = None  # the bound of `LIMITS` that cut the evaluation of the target or path


class Classifier:
    def __init__(self, evaluator: Evaluator, deployment: Deployment, settings: Settings):
        self.evaluator = evaluator
        self.deployment = deployment
        self.settings = settings
        self._back: dict[tuple[ClassRef, str], list[tuple[AgentInstance, ServerRef]]] = {}

    def _routed_back(
        self, site_cls: ClassRef, running: list[AgentInstance], key: str
    ) -> list[tuple[AgentInstance, ServerRef]]:
        """The instances running the class whose config reference `key` names the instance itself
        (worked out once per class and key: an agent many configs run has hundreds of instances)."""
        if (site_cls, key) not in self._back:
            self._back[site_cls, key] = [(i, r) for i in running for r in i.self_refs if r.key == key]
        return self._back[site_cls, key]

    def classify(self, call: ClientCall, site_cls: ClassRef, site_path: str) -> Verdict | None:
        """The rule a client call inside an agent's code breaks, or None."""
        ctx = Ctx(site_path, site_cls)
        servers = self.evaluator.server(call.server, ctx)
        paths = self.evaluator.path(call.path, ctx)
        if any(PARAM in alt for alt in paths) and names_route_itself(paths, self.settings.route):
            paths = without_params(paths)  # the helper names its own route: reported where it posts
        if any(isinstance(s, FromParam) for s in servers) or any(PARAM in alt for alt in paths):
            return None  # a forwarding helper: its callers are checked instead
        evidence: list[Evidence] = list(call.via)
        config_refs: list[Evidence] = []
        running = self.deployment.instances_running(site_cls)
        verdicts = []
        for server in servers:
            match server:
                case OwnName():
                    verdicts.append("self")
                case ConfigRef(key):
                    back = self._routed_back(site_cls, running, key)
                    verdicts.append("self" if back else "other")
                    config_refs.extend(
                        Evidence(r.where.path, r.where.line, "routes_back", i.name, key) for i, r in back
                    )
                    evidence.extend(config_refs)
                case NamedServer(text):
                    bound = [i for i in running if i.name == text]
                    verdicts.append("self" if bound else "other")
                    evidence.extend(Evidence(i.where.path, i.where.line, "runs_agent", text) for i in bound)
                case _:
                    verdicts.append("unknown")
        if "self" not in verdicts and "unknown" not in verdicts:
            return None
        routes = self.deployment.own_routes(site_cls)
        family = self.deployment.responses_routes(site_cls)
        reached = [reachable(alt, routes) for alt in paths]
        main = self.settings.route.split("?")[0]

        cut_server, cut_path = server_limit(servers), path_limit(paths)

        def verdict(
            code: str,
            routes: Iterable[str],
            http_method: str | None = None,
            unresolved: bool = False,
            doubt: Doubt | None = None,
            cut: str | None = None,
        ) -> Verdict:
            config = config_refs[0] if config_refs else None
            found = tuple(dict.fromkeys(evidence))
            limit = cut or cut_server or cut_path
            return Verdict(
                code, tuple(routes), found, tuple(servers), config, http_method, unresolved, doubt, limit
            )

        if not all(v == "self" for v in verdicts):
            if any(r and r <= family and _has_text(alt) for alt, r in zip(paths, reached)):
                return verdict(POSSIBLE_SELF_CALL, [main], doubt="server")
            # Cut short by a limit, the analysis cannot rule a self-call out: said, never silent.
            if cut_server:  # the target may be the agent itself, which any path would make a self-call
                return verdict(POSSIBLE_SELF_CALL, [], doubt="target")
            if any(r & family for alt, r in zip(paths, reached) if path_limit([alt])):
                return verdict(POSSIBLE_SELF_CALL, [main], doubt="path")
            return None
        # The target is the agent's own server: a self-call whatever the path.
        if any(isinstance(s, OwnName) for s in servers):
            evidence.extend(Evidence(i.where.path, i.where.line, "runs_agent", i.name) for i in running[:3])
        evidence.extend(Evidence(site_path, line, "bound", name) for name, line, _ in call.site.aliases)
        evidence.extend(ctx.evidence)
        method, cut_method = self.evaluator.http_method(call.http_method, ctx)
        if all(r and r <= family for r in reached):
            if method == "POST":
                return verdict(SELF_CALL, [main])
            if method is not None:
                return verdict(OTHER_ROUTE, [main], http_method=method)
            return verdict(POSSIBLE_SELF_CALL, [main], doubt="method", cut=cut_method)
        if all(HOLE not in alt for alt in paths):
            names = [sorted(r - family) or [path_text(alt)] for alt, r in zip(paths, reached)]
            found = list(dict.fromkeys(name for group in names for name in group))
            sources = self.deployment.route_sources[site_cls]
            evidence.extend(sources[route] for route in found if route in sources)
            return verdict(OTHER_ROUTE, found)
        return verdict(OTHER_ROUTE, dict.fromkeys(path_text(alt) for alt in paths), unresolved=True)


def path_text(alternative: Path) -> str:
    """A path alternative as a user reads it: unknown parts shown as `{?}`."""
    text = "".join(
        part if isinstance(part, str) else f"{{{part.label or '?'}}}"
        for part in alternative
        if part != PREFIX
    )
    return text or "{?}"


def _has_text(alternative: Path) -> bool:
    return any(isinstance(part, str) and part for part in alternative)


def reachable(alternative: Path, routes: Iterable[str]) -> frozenset[str]:
    """The own routes (normalised templates) a path alternative may reach: unknown parts match
    as wildcards, a rollout prefix and a query string are ignored."""
    text = "".join(part if isinstance(part, str) else "\x00" for part in alternative if part != PREFIX)
    tokens = [None if char == "\x00" else char for char in normal_route(text)]
    return frozenset(template for template in routes if may_match(tokens, _template_tokens(template)))


def _template_tokens(template: str) -> list[str | None]:
    """A route template as characters, None standing for a `{param}` (one or more non-`/`)."""
    return [None if piece.startswith("{") else piece for piece in re.findall(r"\{[^}]*\}|[^{]", template)]


def may_match(path: list[str | None], template: list[str | None]) -> bool:
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
                moves.append((i, j, True) if template[j] is None else (i, j + 1, False))
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
