"""Where a report's paths are relative to. The analysis names files relative to the project root;
people and CI read them elsewhere: text, concise and JUnit output relative to the current folder
(as ruff prints them, so a terminal can open them), SARIF, GitHub and GitLab output relative to
the repository's top level (where CI resolves annotations), JSON relative to the project root (its
`root` key says which)."""

from __future__ import annotations

import os
from pathlib import Path

from ..ftypes import Report

RELATIVE_TO_CWD = ("text", "concise", "junit")
RELATIVE_TO_REPOSITORY = ("sarif", "github", "gitlab")


def repository_top(root: Path) -> Path:
    """git's top level of the checkout holding `root` (`.git` a folder or, in a worktree, a file);
    the root itself outside a checkout."""
    for folder in (root, *root.parents):
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
    return root


def base_for(output_format: str, root: Path) -> Path:
    if output_format in RELATIVE_TO_CWD:
        return Path.cwd()
    if output_format in RELATIVE_TO_REPOSITORY:
        return repository_top(root)
    return root


def relocated(report: Report, base: Path) -> Report:
    """The report with every path relative to `base` (POSIX separators) and `base` as its root."""
    if base == report.root:
        return report
    memo: dict[str, str] = {}

    def move(rel: str) -> str:
        if rel not in memo:
            moved = os.path.relpath(os.path.join(report.root, rel), base)
            memo[rel] = moved.replace(os.sep, "/")
        return memo[rel]

    findings = [f.moved(move) for f in report.findings]
    errors = [e._replace(path=move(e.path)) for e in report.errors]
    return report._replace(root=base, findings=findings, errors=errors)
