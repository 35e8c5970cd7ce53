"""The `agents` inventory: each agent class with its file, bases, YAML instances and self-calls, as
a table for people, one line per agent (`concise`), or JSON."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..ftypes import Report
from ..workspace.discovery import in_scope
from .escape import neutralise
from .fit import cut, left_abbreviated
from .messages import recognition


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
            "recognised": recognition(a),
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
    """A table that fits `width` columns (80 when not a terminal's): each class as Python writes it,
    `Name(Bases)`, over its file; a path longer than the column is abbreviated from the left with
    an ellipsis (its file name and line stay), bases cut with one; instances wrap at their commas,
    and a word too long for its column ends in an ellipsis rather than folding letter by letter."""
    width = width or 80
    places = [_where(row, root) for row in rows]
    classes = [f"{neutralise(row['agent'])}({neutralise(_bases(row))})" for row in rows]
    longest = max((len(text) for text in (*places, *classes)), default=5)
    first = min(longest, max(30, width - 42))  # the rest: instances and the count
    table = Table(title=f"{len(rows)} agent classes", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("class / file", no_wrap=True, overflow="ellipsis", width=first)
    table.add_column("instances", overflow="ellipsis", ratio=1)
    table.add_column("calls", justify="right", no_wrap=True)  # self-calls, in every class's own words
    for row, place, written in zip(rows, places, classes):  # Text: never read as markup
        cell = Text(cut(written, first), style="bold")
        cell.append("\n" + left_abbreviated(place, first), style="dim")
        table.add_row(cell, Text(_instances(row)), str(row["self_calls"]))
    buffer = StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color)
    console.print(table)
    return buffer.getvalue()
