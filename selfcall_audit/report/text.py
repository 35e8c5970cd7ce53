"""The report for people: each finding with its code frame and evidence chain, the self-calls per
agent, then the files that could not be analysed and the closing line.

Only findings are drawn with rich (`frames`), loaded for a report that has some: rich and pygments
take longer to import than a warm scan takes to run, and a clean tree on a terminal needs neither.
The lines after the findings are written as rich writes them (`escape.SGR`).
"""

from __future__ import annotations

from ..ftypes import Report
from .escape import RESET, SGR, neutralise
from .summary import duration, summary_line


def styled(text: str, style: str, color: bool) -> str:
    """One line, styled (a key of `SGR`) when the output is coloured."""
    return f"{SGR[style]}{text}{RESET}\n" if color else f"{text}\n"


def render(
    report: Report,
    width: int | None = None,
    color: bool = False,
    summary: bool = True,
    seconds: float | None = None,
) -> str:
    """`summary`: the per-agent table and the closing line, which `-q` leaves out (every finding
    and every unreadable file is printed either way); `seconds`: the run's time, since the process
    started (default: the analysis')."""
    parts = []
    if report.findings:
        from .frames import render_findings

        parts.append(render_findings(report, width or 120, color, summary))
    for error in report.errors:
        line = neutralise(f"{error.path}:{error.line}:{error.column}: {error.code} {error.message}")
        parts.append(styled(line, "red" if error.fails else "yellow", color))
    if summary:
        took = duration(seconds if seconds is not None else report.seconds)
        parts.append(styled(f"{summary_line(report)} ({took}).", "bold", color))
    return "".join(parts)
