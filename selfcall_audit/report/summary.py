"""The closing line of a report, as the text report ends and as a piped run says it on stderr."""

from __future__ import annotations

from ..ftypes import Report


def summary_line(report: Report) -> str:
    fixable = sum(f.fixable for f in report.findings)
    files = f"{report.files_scanned} files, {report.agent_count} agents"
    if report.findings:
        noun = "self-call" if len(report.findings) == 1 else "self-calls"
        line = f"Found {len(report.findings)} {noun} in {files}"
        if fixable:
            line += f"; {fixable} fixable with `selfcall-audit fix`"
    else:
        line = f"No self-calls in {files}"
    if report.errors:
        line += f"; {len(report.errors)} file(s) could not be analysed"
    return line


def duration(seconds: float) -> str:
    """`1.23s`, or milliseconds under a tenth of a second: a warm run is not `0.00s`."""
    return f"{seconds:.2f}s" if seconds >= 0.1 else f"{max(seconds * 1000, 1):.0f} ms"
