"""A finding in words: its rule's message template filled from the finding's fields. The one place
a finding becomes a sentence, so that every format, flake8 and the pytest helper say the same."""

from __future__ import annotations

from ..ftypes import Finding
from ..rules import RULES


def refresh_command(path: str) -> str:
    """The command that writes a current copy of the helper over the vendored one at `path`."""
    return f"selfcall-audit helper --write {path} --force"


def message(finding: Finding) -> str:
    detail = finding.detail
    text = RULES[finding.code].message.format(
        agent=finding.agent,
        method=finding.method,
        route=detail,
        reason=detail,
        why=detail,
        command=refresh_command(finding.path),
    )
    if finding.config is not None:
        text += f" ({finding.config.note} in {finding.config.path})"
    return text
