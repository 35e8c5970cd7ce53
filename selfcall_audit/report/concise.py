"""`path:line:col: CODE message`, one per line, as flake8 and ruff print them (names from the
repository escaped: a newline in one cannot start a line of its own)."""

from __future__ import annotations

from ..analysis.project import Report
from .escape import neutralise


def render(report: Report) -> str:
    lines = [f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}" for f in report.findings]
    lines += [f"{e.path}:{e.position[0]}:{e.position[1]}: {e.code} {e.message}" for e in report.errors]
    lines = [neutralise(line) for line in lines]  # one line each, whatever the names hold
    return "".join(f"{line}\n" for line in lines)
