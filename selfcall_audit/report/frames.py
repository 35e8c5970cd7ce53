"""The findings of the text report, drawn with rich: each with its code frame (highlighted by
pygments) and evidence chain, then the self-calls per agent."""

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
from .fit import cut, left_abbreviated
from .messages import message, note, reason

_CONTEXT = 1


def _frame(report: Report, path: str, line: int, end_line: int, width: int) -> Syntax | None:
    """The call's lines and one around them, each cut with an ellipsis to fit `width` columns."""
    try:
        source = (report.root / path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    lines = source.split("\n")
    start, stop = max(1, line - _CONTEXT), min(len(lines), end_line + _CONTEXT)
    room = width - len(str(stop)) - 5  # rich's gutter: the marker, the number and its rule
    # Only the lines shown are highlighted: the whole file, once per finding, was most of the
    # time a warm scan on a terminal took.
    shown = [cut(neutralise(text, keep="\t"), room) for text in lines[start - 1 : stop]]
    return Syntax(
        "\n".join(shown),  # escape sequences shown, not sent
        "python",
        line_numbers=True,
        start_line=start,
        highlight_lines=set(range(line, end_line + 1)),
        theme="ansi_dark",
        word_wrap=False,
        tab_size=8,
    )


def render_findings(report: Report, width: int, color: bool, summary: bool) -> str:
    """Every finding with its frame, evidence and what keeps it from being fixed; with `summary`,
    the table of self-calls per agent after them."""
    buffer = StringIO()
    # Colours as the run decided them (`--color`, NO_COLOR, FORCE_COLOR), not as TERM would
    # (rich leaves them out for TERM=dumb): as the concise report and the lines after these.
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
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
        frame = _frame(report, finding.path, finding.line, finding.end_line, console.width)
        if frame is not None:
            console.print(frame)
        for evidence in finding.evidence:
            console.print(
                Text(neutralise(f"  = {evidence.path}:{evidence.line}: {note(evidence)}"), style="dim"),
                soft_wrap=True,
            )
        if finding.fix_blocker:
            console.print(
                Text(neutralise(f"  = not fixable: {reason(finding.fix_blocker)}"), style="dim"),
                soft_wrap=True,
            )
        console.print()

    if summary:
        per_agent = Counter((f.agent, f.path) for f in report.findings)
        table = Table(title="Self-calls per agent", title_justify="left")
        table.add_column("agent", overflow="ellipsis")
        table.add_column("file", no_wrap=True, overflow="ellipsis")
        table.add_column("self-calls", justify="right", no_wrap=True)
        budget = max(24, console.width - 40)  # a long path loses its start, not its file name
        for (agent, path), count in sorted(per_agent.items(), key=lambda item: (item[0][1], item[0][0])):
            cells = (neutralise(agent), left_abbreviated(neutralise(path), budget))
            table.add_row(*(Text(cell) for cell in cells), str(count))  # Text: no markup
        console.print(table)

    return buffer.getvalue()
