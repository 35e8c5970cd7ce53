"""A finding in words: its rule's message template filled from the finding's fields, and its
evidence lines. The one place a finding becomes a sentence, so that every format, flake8, the
language server and the pytest helper say the same."""

from __future__ import annotations

from .. import __version__
from ..analysis.limits import LIMITS
from ..ftypes import AgentInfo, Blocker, Evidence, Finding
from ..rules import RULES

_NOTES = {
    "bound": "`{name}` is bound here",
    "defined": "`{name}` is defined here",
    "property": "property `{name}` is defined here",
    "registered": "route `{name}` is registered here",
    "runs_agent": "instance `{name}` runs this agent",
    "routes_back": "instance `{name}` routes `{key}` back to itself",
    "runs_in": "runs in agent `{name}`",
    "through": "through `{name}()`, which makes the call at line {line}",
}

_DOUBTS = {
    "server": "the server name posting to {route} cannot be resolved statically",
    "target": "the server name cannot be resolved statically",
    "path": "the path, which may be {route}, cannot be resolved statically",
    "method": "its own {route} with a method that cannot be resolved",
}

_STALENESS = {
    "edited": "was edited since selfcall-audit {version} wrote it",
    "outdated": "is the helper of selfcall-audit {version}, not of the installed {installed}",
}


_REASONS = {
    "partial": "the call goes through functools.partial",
    "through_helper": "the call goes through `{name}()`, which does more than pass its arguments on: only "
    "a method whose whole body is `return await self.server_client.post(name=name, ...)` is seen through",
    "helper_positional": "it passes arguments to `{name}()` by position: name them, as its parameters are named",
    "helper_keyword": "`{name}()` does not pass {names} on to the client as an argument the in-process "
    "helper takes (`url_path`, `json`, `cookies`, `headers`)",
    "helper_expansion": "arguments come from a `**` expansion whose keys `{name}()` does not pass on as they are",
    "helper_default": "`{name}()` sends its own default for {names}, which the rewritten call would not send",
    "helper_overridden": "{names} defines `{name}()` otherwise, and runs this call with its own",
    "not_a_post": "the call is not a `.post(...)` or `.request(...)` of the server client",
    "async_with": "the response is used as an async context manager",
    "in_default": "the call is in a default argument value, evaluated once when the function is defined",
    "in_decorator": "the call is in a decorator, evaluated once when the function is defined",
    "passed_twice": "`{name}` is passed twice (by name and in a `**` expansion)",
    "expanded_key": "a `**` expansion passes `{name}`, which the in-process helper does not take: "
    "rewrite the call by hand",
    "star_expansion": "arguments come from a `{name}` expansion: rewrite the call by hand",
    "positional": "it passes positional arguments the in-process helper does not take",
    "keyword": "the in-process helper takes no `{name}` argument",
    "no_server_or_path": "it does not name both the server and the url path",
    "outside_method": "the call is not inside a method that has `self`",
    "other_instances": "in other instances ({names}) the target is another server: a rewrite would skip it",
    "app_not_recorded": "`{name}.setup_webserver()` (line {line}) builds the agent's app without "
    "`super().setup_webserver()` and without recording it as `self._webserver_app`, where the in-process "
    "helper finds it",
    "not_found": "the call is not where the analysis found it",
    "not_described": "the call is not the one the analysis described; run `selfcall-audit fix` again",
    "self_shadowed": "`{name}` at the call is not the method's own (a nested function, lambda or "
    "comprehension binds it)",
    "self_rebound": "`{name}` is rebound in the method (line {line}); the helper needs the agent itself",
    "walrus_in_removed_part": "the call binds {names} with `:=` in a part the rewrite removes",
    "call_in_removed_part": "the server name or client comes from `{name}`, which the rewrite would no "
    "longer run",
    "helper_name_taken": "`{name}` already names something else here (line {line}); "
    "choose the helper's name with --helper MODULE:NAME",
    "streamed": "the response body is streamed (`{name}`); the in-process helper buffers it",
    "response_use": "the response is used as the in-process helper's is not ({names}): it answers as "
    "aiohttp's `ClientResponse` does, whose `json()`, `text()` and `read()` are awaited",
    "response_passed_on": "the response goes where its uses are not followed ({names}): only NeMo Gym's "
    "`raise_for_status(response)` and `get_response_json(response)` are known to read it as the "
    "in-process helper's response serves",
    "wrapper_overridden": "the response comes back through `{name}()`, which {names} defines "
    "otherwise: what it does with the response is not followed",
    "bound_around_the_call": "`{name}` at the call is bound by a lambda or comprehension around it",
    "rebound_in_loop": "`{name}` is bound again at line {line}, in a loop around the call: a later pass "
    "may post elsewhere",
    "rebound_after_closure": "`{name}` is bound again at line {line}, after the function that makes the "
    "call was defined",
    "rebound_by_nonlocal": "a nested function rebinds `{name}` through `nonlocal` (line {line})",
    "rebound_by_global": "a function rebinds `{name}` through `global` (line {line})",
    "bound_by_handler": "`{name}` is bound by `except ... as` at line {line}, which can reach the call",
    "bound_by_walrus": "`{name}` is bound by `:=` at line {line}, which can reach the call",
    "maybe_unbound": "`{name}` may be unbound when the call runs (line {line})",
    "several_bindings": "more than one binding of `{name}` can reach the call (line {line} too)",
    "not_a_plain_binding": "`{name}` is not bound by a plain assignment (line {line})",
    "unreachable": "no path from the start of the function reaches the call",
}


_RECOGNITIONS = {
    "base": "subclass of {via}",
    "route": "serves its route (registered at {via}:{line})",
    "configured": "configured agent base",
}


_MODELLINGS = {
    "fakes_and_asserts": "fakes server_client.post for {route} and asserts the calls the self-call made",
    "asserts": "asserts that the self-call to {route} went through server_client.post",
    "fakes_route": "fakes server_client.post for {route}, which the self-call no longer reaches",
    "fakes_post": "fakes server_client.post, which answered the self-call too",
    "middleware": "serves the agent's app without the exception middleware its fake of {route} emulated, "
    "and checks the error text",
}

# What each bound of the analysis counts, for "stopped at its limit of N ...".
_LIMIT_UNITS = {
    "evaluation_depth": "names, constants and calls followed for one value",
    "alternatives": "strings one expression may be",
    "fact_alternatives": "values one name may hold in a function",
    "fact_depth": "levels of nesting kept in one expression",
    "inlined_depth": "levels of nesting once local names are substituted",
    "sequence_items": "items of a list or tuple written in place",
}


def refresh_command(path: str) -> str:
    """The command that writes a current copy of the helper over the vendored one at `path`."""
    return f"selfcall-audit helper --write {path} --force"


def note(evidence: Evidence) -> str:
    """What an evidence line shows, in words."""
    return _NOTES[evidence.kind].format(name=evidence.name, key=evidence.key, line=evidence.line)


def reason(blocker: Blocker) -> str:
    """Why a self-call is not rewritten, in words."""
    names = ", ".join(f"`{name}`" for name in blocker.names)
    return _REASONS[blocker.kind].format(name=blocker.name, line=blocker.line, names=names)


def recognition(agent: AgentInfo) -> str:
    """How a class is known to be an agent, in words (the inventory's `recognised`)."""
    return _RECOGNITIONS[agent.recognised].format(via=agent.via, line=agent.via_line)


def modelled(models: str, route: str) -> str:
    """How a test modelled the HTTP self-call to `route` that `fix` removed, in words."""
    return _MODELLINGS[models].format(route=route)


def route(finding: Finding) -> str:
    """The routes a call may reach as one phrase: `/run or /seed`, `GET /v1/responses`, or the
    paths as written when they cannot be resolved."""
    text = " or ".join(finding.routes)
    if finding.http_method is not None:
        text = f"{finding.http_method} {text}"
    if finding.unresolved:
        text += " (a path that cannot be resolved statically)"
    return text


def message(finding: Finding) -> str:
    doubt = _DOUBTS[finding.doubt].format(route=route(finding)) if finding.doubt else ""
    why = (
        _STALENESS[finding.stale].format(version=finding.stale_version, installed=__version__)
        if finding.stale
        else ""
    )
    text = RULES[finding.code].message.format(
        agent=finding.agent,
        method=finding.method,
        route=route(finding),
        reason=doubt,
        why=why,
        command=refresh_command(finding.path),
    )
    if finding.config is not None:
        text += f" ({note(finding.config)} in {finding.config.path})"
    if finding.limit is not None:
        text += f" ({limit_words(finding.limit)})"
    return text


def limit_words(limit: str) -> str:
    """Why the analysis could not say more: the bound it reached, in words."""
    return f"the analysis stopped at its limit of {getattr(LIMITS, limit)} {_LIMIT_UNITS[limit]}"
