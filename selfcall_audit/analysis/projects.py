"""A run over several projects: a monorepo's nested projects (folders whose pyproject.toml holds
[tool.selfcall-audit]) and the files of several projects that pre-commit passes at once. Each
project is analysed on its own, with its own root and settings, as ruff checks each file under its
nearest config; the front ends print one report of them all."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from ..config import Settings, python_floor
from ..workspace.discovery import find_root
from ..workspace.listing import GitListing
from .project import Progress, Project, Report


class Part:
    """One project's share of a run, with the settings it was analysed under. (Not a dataclass:
    making one costs every run, most of them of one project, more than this whole module.)"""

    __slots__ = ("report", "settings")

    def __init__(self, report: Report, settings: Settings) -> None:
        self.report = report
        self.settings = settings


class Projects:
    """The projects of a run, outermost first: those the paths belong to, then the nested projects
    each analysis finds in its scope (`found`), each analysed once."""

    def __init__(self, groups: dict[Path, tuple[Path, ...]], settings_for: Callable[[Path], Settings]):
        self._pending = dict(groups)
        self._done: set[Path] = set()
        self._settings_for = settings_for

    def __iter__(self) -> Iterator[tuple[Path, Settings, tuple[Path, ...]]]:
        """Each project's root, settings and the paths to report on, the scope of its analysis."""
        while self._pending:
            root = min(self._pending, key=lambda r: (len(r.parts), r))
            paths = self._pending.pop(root)
            self._done.add(root)
            yield root, self._settings_for(root), paths

    def found(self, report: Report) -> None:
        """The nested projects an analysis found in its scope, to analyse next, each as a whole."""
        for root in report.projects:
            if root not in self._done:
                self._pending[root] = (root,)


def by_project(paths: tuple[Path, ...]) -> tuple[Path, dict[Path, tuple[Path, ...]]]:
    """The paths grouped by the project each belongs to, and the folder the report is relative to:
    the outermost of their roots when it holds the others (a monorepo), else the folder holding
    them all (sibling projects, as pre-commit may pass together)."""
    if not paths:
        root = find_root(Path.cwd())
        return root, {root: (root,)}
    groups: dict[Path, list[Path]] = {}
    of_folder: dict[str, Path] = {}  # pre-commit passes many files of a few folders
    for path in paths:
        start = os.path.abspath(path)
        folder = start if os.path.isdir(start) else os.path.dirname(start)
        if folder not in of_folder:
            of_folder[folder] = find_root(Path(folder))
        groups.setdefault(of_folder[folder], []).append(path)
    roots = list(groups)
    outer = [r for r in roots if all(r == other or r in other.parents for other in roots)]
    root = outer[0] if outer else Path(os.path.commonpath(roots))
    return root, {r: tuple(p) for r, p in groups.items()}


def analyze_projects(
    projects: Projects, progress: Progress | None, inventory: bool = False, early: GitListing | None = None
) -> list[Part]:
    """Each project's report, the nested ones each analysis finds included; `early`: git's listing
    of one of them, started before."""
    parts = []
    for root, settings, paths in projects:
        report = Project(root, settings, progress=progress).analyze(paths, inventory=inventory, early=early)
        projects.found(report)
        parts.append(Part(report, settings))
    return parts


def merged(parts: list[Part], root: Path) -> Report:
    """One report of every part, its paths relative to `root`, a folder holding each part's root."""
    if len(parts) == 1 and parts[0].report.root == root:
        return parts[0].report
    findings, errors, agents = [], [], []
    for part in parts:
        report = part.report
        prefix = os.path.relpath(report.root, root).replace(os.sep, "/")
        if prefix == ".":
            findings += report.findings
            errors += report.errors
            agents += report.agents
            continue

        def move(rel: str, prefix: str = prefix) -> str:
            return prefix if rel == "." else f"{prefix}/{rel}"

        findings += [f.moved(move) for f in report.findings]
        errors += [replace(e, path=move(e.path)) for e in report.errors]
        agents += [replace(a, path=move(a.path)) for a in report.agents]
    return Report(
        root=root,
        findings=sorted(findings, key=lambda f: f.sort_key),
        errors=sorted(errors, key=lambda e: e.path),
        files_scanned=sum(p.report.files_scanned for p in parts),
        files_parsed=sum(p.report.files_parsed for p in parts),
        agent_count=sum(p.report.agent_count for p in parts),
        agents=sorted(agents, key=lambda a: (a.path, a.line)),
        seconds=sum(p.report.seconds for p in parts),
        suppressed=sum(p.report.suppressed for p in parts),
    )


def failed_strictly(parts: list[Part]) -> bool:
    """Does a project whose settings are strict have unreadable files (SCA900)?"""
    return any(part.settings.strict and part.report.errors for part in parts)


def unparsed_by_an_older_python(parts: list[Part]) -> tuple[tuple[int, int], int] | None:
    """The Python a project requires, and how many of its Python files could not be read, when
    that Python is newer than the one running: those files may use syntax this interpreter
    cannot parse (3.12's f-strings), and a self-call in them would go unseen."""
    running = sys.version_info[:2]
    for part in parts:
        floor = python_floor(part.report.root)
        unparsed = sum(1 for error in part.report.errors if error.path.endswith(".py"))
        if floor is not None and floor > running and unparsed:
            return floor, unparsed
    return None
