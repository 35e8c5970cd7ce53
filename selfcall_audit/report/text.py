"""The rich report for people: code frame, evidence chain, per-agent summary."""

from __future__ import annotations

from collections import Counter
from io import StringIO

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from ..ftypes import Report
from ..rules import RULES
from .escape import neutralise
from .messages import message

_CONTEXT = 1


def _frame(report: Report, path: str, line: int, end_line: int) -> Syntax | None:
    try:
        source = (report.root / path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    lines = source.split("\n")
    start, stop = max(1, line - _CONTEXT), min(len(lines), end_line + _CONTEXT)
    return Syntax(
        "\n".join(neutralise(text, keep="\t") for text in lines),  # escape sequences shown, not sent
        "python",
        line_numbers=True,
        line_range=(start, stop),
        highlight_lines=set(range(line, end_line + 1)),
        theme="ansi_dark",
        word_wrap=False,
    )


def render(report: Report, width: int | None = None, color: bool = False, summary: bool = True) -> str:
    """`summary`: the per-agent table and the closing line, which `-q` leaves out (every finding
    and every unreadable file is printed either way)."""
    buffer = StringIO()
    console = Console(
        file=buffer, width=width or 120, force_terminal=color, no_color=not color, highlight=False
    )
    for finding in report.findings:
        header = Text()
        header.append(f"{neutralise(finding.path)}:{finding.line}:{finding.column}", style="bold")
        header.append(": ")
        header.append(
            finding.code, style="bold red" if RULES[finding.code].severity == "error" else "bold yellow"
        )
        header.append(f" {neutralise(message(finding))}")
        if finding.fixable:
            header.append(" [fixable]", style="cyan")
        console.print(header, soft_wrap=True)
        frame = _frame(report, finding.path, finding.line, finding.end_line)
        if frame is not None:
            console.print(frame)
        for evidence in finding.evidence:
            console.print(
                Text(neutralise(f"  = {evidence.path}:{evidence.line}: {evidence.note}"), style="dim"),
                soft_wrap=True,
            )
        if finding.fix_blocker:
            console.print(
                Text(neutralise(f"  = not fixable: {finding.fix_blocker}"), style="dim"), soft_wrap=True
            )
        console.print()

    if report.findings and summary:
        per_agent = Counter((f.agent, f.path) for f in report.findings)
        table = Table(title="Self-calls per agent", title_justify="left")
        table.add_column("agent")
        table.add_column("file")
        table.add_column("self-calls", justify="right")
        for (agent, path), count in sorted(per_agent.items(), key=lambda item: (item[0][1], item[0][0])):
            table.add_row(Text(neutralise(agent)), Text(neutralise(path)), str(count))  # Text: no markup
        console.print(table)

    for error in report.errors:
        console.print(
            Text(
                neutralise(f"{error.path}:{error.position[0]}: {error.code} {error.message}"), style="yellow"
            ),
            soft_wrap=True,
        )

    if summary:
        console.print(
            Text(f"{_summary(report)} ({_duration(report.seconds)}).", style="bold"), soft_wrap=True
        )
    return buffer.getvalue()


def _summary(report: Report) -> str:
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


def _duration(seconds: float) -> str:
    """`1.23s`, or milliseconds under a tenth of a second: a warm run is not `0.00s`."""
    return f"{seconds:.2f}s" if seconds >= 0.1 else f"{max(seconds * 1000, 1):.0f} ms"
