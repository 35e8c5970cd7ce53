"""`path:line:col: CODE message`, one per line, as flake8 and ruff print them."""

from __future__ import annotations

from ..analysis.project import Report


def render(report: Report) -> str:
    lines = [f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}" for f in report.findings]
    lines += [f"{e.path}:1:1: {e.code} {e.message}" for e in report.errors]
    return "".join(f"{line}\n" for line in lines)
