"""`path:line:col: CODE message`, one per line, as flake8 and ruff print them (names from the
repository escaped: a newline in one cannot start a line of its own), coloured as ruff colours them
when asked: the path bold, the colons cyan, the code bold red; then, as ruff's `Found N errors.`,
the closing count (not the run's time: the same input gives the same bytes)."""

from __future__ import annotations

from ..ftypes import Report
from .escape import RESET, SGR, neutralise
from .messages import message
from .summary import summary_line

_CODE = {"error": SGR["bold red"], "warning": SGR["bold yellow"]}


def render(report: Report, color: bool = False, summary: bool = True) -> str:
    """`summary`: the closing count, which `-q` leaves out."""
    rows = [(f.path, f.line, f.column, f.code, message(f), "error") for f in report.findings]
    rows += [(e.path, e.line, e.column, e.code, e.message, e.severity) for e in report.errors]
    bold, cyan, reset = (SGR["bold"], SGR["cyan"], RESET) if color else ("", "", "")
    colon = f"{cyan}:{reset}"
    lines = "".join(  # one line each, whatever the names hold
        f"{bold}{neutralise(path)}{reset}{colon}{line}{colon}{col}{colon} "
        f"{_CODE[severity] if color else ''}{code}{reset} {neutralise(text)}\n"
        for path, line, col, code, text, severity in rows
    )
    return f"{lines}{summary_line(report)}.\n" if summary else lines
