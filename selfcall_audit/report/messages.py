"""A finding in words: its rule's message template filled from the finding's fields. The one place
a finding becomes a sentence, so that every format, flake8 and the pytest helper say the same."""

from __future__ import annotations

from ..analysis.limits import LIMITS
from ..ftypes import Finding
from ..rules import RULES

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
    if finding.limit is not None:
        text += f" ({limit_words(finding.limit)})"
    return text


def limit_words(limit: str) -> str:
    """Why the analysis could not say more: the bound it reached, in words."""
    return f"the analysis stopped at its limit of {getattr(LIMITS, limit)} {_LIMIT_UNITS[limit]}"
