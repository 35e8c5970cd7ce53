"""The closing line of a report, as the text report ends and as a piped run says it on stderr."""

from __future__ import annotations

from ..ftypes import Report


def summary_line(report: Report) -> str:
    fixable = sum(f.fixable for f in report.findings)
    files = f"{plural(report.files_scanned, 'file')}, {plural(report.agent_count, 'agent')}"
    if report.findings:
        line = f"Found {plural(len(report.findings), 'self-call')} in {files}"
        if fixable:
            line += f"; {fixable} fixable with `selfcall-audit fix`"
    else:
        line = f"No self-calls in {files}"
    if report.errors:
        line += f"; {plural(len(report.errors), 'file')} could not be analysed"
    return line


def plural(count: int, word: str) -> str:
    """`1 file`, `2 files`."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def duration(seconds: float) -> str:
    """`1.23s`, or milliseconds under a tenth of a second: a warm run is not `0.00s`."""
    return f"{seconds:.2f}s" if seconds >= 0.1 else f"{max(seconds * 1000, 1):.0f} ms"
