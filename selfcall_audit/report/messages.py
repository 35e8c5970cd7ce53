"""A finding in words: its rule's message template filled from the finding's fields, and its
evidence lines. The one place a finding becomes a sentence, so that every format, flake8, the
language server and the pytest helper say the same."""

from __future__ import annotations

from .. import __version__
from ..ftypes import Evidence, Finding
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
    "method": "its own {route} with a method that cannot be resolved",
}

_STALENESS = {
    "edited": "was edited since selfcall-audit {version} wrote it",
    "outdated": "is the helper of selfcall-audit {version}, not of the installed {installed}",
}


def refresh_command(path: str) -> str:
    """The command that writes a current copy of the helper over the vendored one at `path`."""
    return f"selfcall-audit helper --write {path} --force"


def note(evidence: Evidence) -> str:
    """What an evidence line shows, in words."""
    return _NOTES[evidence.kind].format(name=evidence.name, key=evidence.key, line=evidence.line)


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
    reason = _DOUBTS[finding.doubt].format(route=route(finding)) if finding.doubt else ""
    why = (
        _STALENESS[finding.stale].format(version=finding.stale_version, installed=__version__)
        if finding.stale
        else ""
    )
    text = RULES[finding.code].message.format(
        agent=finding.agent,
        method=finding.method,
        route=route(finding),
        reason=reason,
        why=why,
        command=refresh_command(finding.path),
    )
    if finding.config is not None:
        text += f" ({note(finding.config)} in {finding.config.path})"
    return text
