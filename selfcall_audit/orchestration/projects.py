"""A run over several projects: a monorepo's nested projects (folders whose pyproject.toml holds
[tool.selfcall-audit]) and the files of several projects that pre-commit passes at once. Each
project is analysed on its own, with its own root and settings, as ruff checks each file under its
nearest config; the front ends print one report of them all."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..config import Settings
from ..ftypes import Report
from ..workspace.discovery import find_root


class Projects:
    """The projects of a run, outermost first: those the paths belong to, then the nested projects
    each analysis finds in its scope (`found`), each analysed once."""

    def __init__(
        self,
        groups: dict[Path, tuple[Path, ...]],
        settings_for: Callable[[Path], Settings],
        caches_of: Callable[[Path], Path | None] | None = None,
    ):
        """`caches_of(root)`: the root of the project whose cache the project at `root` reads and
        never writes, or None for its own (see `Project`)."""
        self._pending = dict(groups)
        self._done: set[Path] = set()
        self._settings_for = settings_for
        self._caches_of = caches_of

    def __iter__(self) -> Iterator[tuple[Path, Settings, tuple[Path, ...]]]:
        """Each project's root, settings and the paths to report on, the scope of its analysis."""
        while self._pending:
            root = min(self._pending, key=lambda r: (len(r.parts), r))
            paths = self._pending.pop(root)
            self._done.add(root)
            yield root, self._settings_for(root), paths

    def settings(self, root: Path) -> Settings:
        """The settings the project at `root` is analysed with."""
        return self._settings_for(root)

    def borrowed(self, root: Path) -> Path | None:
        """The root of the project whose cache the project at `root` reads, if not its own."""
        return self._caches_of(root) if self._caches_of else None

    @property
    def analysed(self) -> frozenset[Path]:
        """The roots of the projects analysed so far."""
        return frozenset(self._done)

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


def merged(reports: list[Report], root: Path) -> Report:
    """One report of every project's, its paths relative to `root`, a folder holding each one's root."""
    if len(reports) == 1 and reports[0].root == root:
        return reports[0]
    findings, errors, agents, excluded = [], [], [], []
    for report in reports:
        prefix = os.path.relpath(report.root, root).replace(os.sep, "/")
        if prefix == ".":
            findings += report.findings
            errors += report.errors
            agents += report.agents
            excluded += report.excluded
            continue

        def move(rel: str, prefix: str = prefix) -> str:
            return prefix if rel == "." else f"{prefix}/{rel}"

        findings += [f.moved(move) for f in report.findings]
        errors += [e._replace(path=move(e.path)) for e in report.errors]
        agents += [a._replace(path=move(a.path)) for a in report.agents]
        excluded += [move(rel) for rel in report.excluded]
    return Report(
        root=root,
        findings=sorted(findings, key=lambda f: f.sort_key),
        errors=sorted(errors, key=lambda e: e.path),
        files_scanned=sum(p.files_scanned for p in reports),
        files_parsed=sum(p.files_parsed for p in reports),
        agent_count=sum(p.agent_count for p in reports),
        agents=sorted(agents, key=lambda a: (a.path, a.line)),
        seconds=sum(p.seconds for p in reports),
        suppressed=sum(p.suppressed for p in reports),
        inputs_failed=any(p.inputs_failed for p in reports),
        excluded=tuple(excluded),
        needs_python=max((p.needs_python for p in reports if p.needs_python), default=None),
    )
