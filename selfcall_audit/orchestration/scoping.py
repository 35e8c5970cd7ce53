"""What a run over some paths shows of the project's analysis: the scopes the paths name, the
findings in them or with evidence there, and what is said of the rest."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..ftypes import Finding, InputError
from ..workspace.discovery import FileSet, in_scope


def cut_scopes(root: Path, paths: Iterable[Path]) -> tuple[str, ...]:
    """The root-relative scopes the paths name (`""` for the root itself)."""
    scopes = []
    for path in paths:
        # A link named on the command line that leads nowhere (broken, a loop) or out of the root
        # (to a device, a file elsewhere) is its own scope: the listed file it is, read as a
        # whole-project scan reads it.
        link = os.path.islink(path)
        real = None if link and not os.path.exists(path) else path.resolve()
        if link and (real is None or not real.is_relative_to(root)):
            real = Path(os.path.realpath(os.path.dirname(os.path.abspath(path))), path.name)
        rel = os.path.relpath(real, root)
        scopes.append("" if rel == "." else rel.replace(os.sep, "/"))
    return tuple(scopes)


def in_view(findings: list[Finding], scopes: tuple[str, ...]) -> list[Finding]:
    """The findings located in the scopes, or with evidence there (an edit there may be their cause)."""
    return [
        f for f in findings if in_scope(f.path, scopes) or any(in_scope(e.path, scopes) for e in f.evidence)
    ]


def with_limits_hit(
    errors: list[InputError], shown: list[Finding], selected: list[Finding]
) -> list[InputError]:
    """A call the analysis stopped following at one of its limits is never passed over in silence:
    when its finding (an SCA003, off by default) is not selected, an SCA900 entry at the call says
    the analysis stopped there."""
    kept = set(selected)
    hits = [f for f in shown if f.limit is not None and f not in kept]
    if not hits:
        return errors
    entries = {
        (f.path, f.line): InputError(
            f.path,
            f"the analysis stopped following this call at one of its limits ({f.limit}); it may be "
            f"a self-call: select {f.code} to see it",
            "too_deep",
            f.line,
            f.column,
        )
        for f in hits
    }
    return sorted([*errors, *entries.values()], key=lambda e: (e.path, e.line, e.column))


def excluded(files: FileSet, scopes: tuple[str, ...]) -> tuple[str, ...]:
    """The scopes named on purpose that hold Python files, none of them analysed: each excluded
    by the settings or as test code (said, not passed over in silence)."""
    sources = set(files.sources)
    theirs = tuple(f"{folder}/" for folder in files.projects)  # a nested project's files are not ours
    found = []
    for scope in scopes:
        if not scope or scope in sources or f"{scope}/".startswith(theirs):
            continue
        if scope in files.modules or (
            not any(in_scope(rel, (scope,)) for rel in files.sources)
            and any(in_scope(rel, (scope,)) for rel in files.modules)
        ):
            found.append(scope)
    return tuple(found)
