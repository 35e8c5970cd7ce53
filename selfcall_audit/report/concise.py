"""`path:line:col: CODE message`, one per line, as flake8 and ruff print them (names from the
repository escaped: a newline in one cannot start a line of its own), coloured as ruff colours them
when asked: the path bold, the colons cyan, the code bold red."""

from __future__ import annotations

from ..ftypes import Report
from .escape import neutralise
from .messages import message

_BOLD, _CYAN, _BOLD_RED, _RESET = "\x1b[1m", "\x1b[36m", "\x1b[1;31m", "\x1b[0m"


def render(report: Report, color: bool = False) -> str:
    rows = [(f.path, f.line, f.column, f.code, message(f)) for f in report.findings]
    rows += [(e.path, *e.position, e.code, e.message) for e in report.errors]
    bold, cyan, red, reset = (_BOLD, _CYAN, _BOLD_RED, _RESET) if color else ("", "", "", "")
    colon = f"{cyan}:{reset}"
    return "".join(  # one line each, whatever the names hold
        f"{bold}{neutralise(path)}{reset}{colon}{line}{colon}{col}{colon} {red}{code}{reset} {neutralise(message)}\n"
        for path, line, col, code, message in rows
    )
