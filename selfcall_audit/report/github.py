"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request diff."""

from __future__ import annotations

from ..ftypes import Finding, Report
from ..rules import RULES
from .escape import neutralise
from .messages import message, note


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF are percent-encoded, as the runner decodes them."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: also `:` and `,`, which would otherwise end the value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, properties: dict[str, object], lines: list[str]) -> str:
    """One workflow command; the message's lines are ours, what each holds is escaped first (the
    runner decodes `%0A` back to a newline, so an encoded newline from a file name would still
    break the annotation's text)."""
    listed = ",".join(f"{key}={escape_property(neutralise(str(value)))}" for key, value in properties.items())
    message = "\n".join(neutralise(line) for line in lines)
    return f"::{kind} {listed}::{escape_data(message)}"


def _annotation(finding: Finding) -> str:
    lines = [message(finding)]
    lines += [f"= {e.path}:{e.line}: {note(e)}" for e in finding.evidence]
    if finding.fixable:
        lines.append("= fixable with `selfcall-audit fix`")
    properties = {
        "file": finding.path,
        "line": finding.line,
        "col": finding.column,
        "endLine": finding.end_line,
        "endColumn": finding.end_column,
        "title": finding.code,
    }
    return _command(RULES[finding.code].severity, properties, lines)


def render(report: Report) -> str:
    lines = [_annotation(f) for f in report.findings]
    lines += [
        _command(
            e.severity,
            {"file": e.path, "line": e.line, "col": e.column, "title": e.code},
            [e.message],
        )
        for e in report.errors
    ]
    return "".join(f"{line}\n" for line in lines)
