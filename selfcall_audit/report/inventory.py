"""The `agents` inventory: each agent class with its file, bases, YAML instances and self-calls, as
a table for people, one line per agent (`concise`), or JSON."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

from ..ftypes import Report
from ..workspace.discovery import in_scope
from .escape import neutralise


def rows(report: Report, scopes: tuple[str, ...]) -> list[dict]:
    """The agents in `scopes`, each with the self-calls its class makes anywhere in the project
    (the report is of the whole project, so an agent's count does not depend on the scopes)."""
    counts: dict[tuple[str, str], int] = {}
    for finding in report.findings:
        counts[(finding.path, finding.agent)] = counts.get((finding.path, finding.agent), 0) + 1
    return [
        {
            "agent": a.name,
            "path": a.path,
            "line": a.line,
            "bases": list(a.bases),
            "instances": list(a.instances),
            "recognised": a.recognised,
            "self_calls": counts.get((a.path, a.name), 0),
        }
        for a in report.agents
        if in_scope(a.path, scopes)
    ]


def render_json(rows: list[dict], root: Path) -> str:
    """Paths relative to `root`, as in `scan --format json`."""
    return json.dumps({"version": 1, "root": str(root), "agents": rows}, indent=2) + "\n"


def _where(row: dict, root: Path) -> str:  # relative to the current folder, as `scan` prints paths
    return neutralise(os.path.relpath(root / row["path"]).replace(os.sep, "/")) + f":{row['line']}"


def _bases(row: dict) -> str:
    return ", ".join(b.rsplit(".", 1)[-1] for b in row["bases"])


def _instances(row: dict) -> str:
    return neutralise(", ".join(row["instances"]) or "-")


def render_concise(rows: list[dict], root: Path) -> str:
    return "".join(
        f"{_where(row, root)}: {row['agent']} ({_bases(row)}) instances: {_instances(row)}; "
        f"self-calls: {row['self_calls']}\n"
        for row in rows
    )


def render_table(rows: list[dict], root: Path, width: int | None, color: bool) -> str:
    """A table whose file column is never cut: on a narrow terminal the other columns fold, and
    a path longer than the terminal is wider than it rather than shortened."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(rows)} agent classes", title_justify="left")
    longest = max((len(_where(row, root)) for row in rows), default=4)
    table.add_column("agent", overflow="fold")
    table.add_column("file", no_wrap=True, min_width=longest)
    table.add_column("bases", overflow="fold")
    table.add_column("instances", overflow="fold")
    table.add_column("self-calls", justify="right")
    for row in rows:  # Text: names from the repository are never read as markup
        cells = (neutralise(row["agent"]), _where(row, root), neutralise(_bases(row)), _instances(row))
        table.add_row(*(Text(cell) for cell in cells), str(row["self_calls"]))
    buffer = StringIO()
    console = Console(
        file=buffer, width=max(width or 160, longest + 40), force_terminal=color, no_color=not color
    )
    console.print(table)
    return buffer.getvalue()
