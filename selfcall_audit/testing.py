"""A test for the audited repo's own suite: fail when an agent self-calls, listing every call.

    from selfcall_audit.testing import assert_no_self_calls

    def test_agents_do_not_call_themselves():
        assert_no_self_calls(".")

A Python file that does not parse (SCA900) fails the test too, as it fails `scan`: a self-call in it
would go unseen; other SCA900 entries (a `config_paths` entry naming a missing file) fail it only
when the settings are strict. Allow a known one by naming its file, or its file and method, in
`allow`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from . import api
from .config import Settings, load_settings
from .ftypes import Report
from .report.messages import message
from .report.summary import plural
from .rules import parse_codes
from .workspace.discovery import find_root


def allow_key(path: str, agent: str, method: str) -> str:
    """The `allow` entry for the self-calls of one method: `path::Agent.method`."""
    return f"{path}::{agent}.{method}"


def assert_no_self_calls(
    root: str | Path = ".",
    paths: Iterable[str | Path] | None = None,
    allow: Iterable[str] | None = None,
    select: str | Iterable[str] | None = None,
) -> Report:
    """Raise AssertionError listing each self-call and unreadable file; return the report otherwise.

    root: the project, or any folder or file inside it (its pyproject.toml settings apply).
    paths: report only on these (relative to the project root); the whole project is still indexed.
    allow: entries `path::Agent.method` (the self-calls of that method) or `path` (everything
    reported in that file, including an unreadable-file error); paths relative to the project root.
    select: rule codes or prefixes, e.g. "SCA001,SCA002" or ["SCA"], replacing the settings' selection.
    """
    if not os.path.lexists(root):  # else the folder above it would be audited instead
        raise FileNotFoundError(f"assert_no_self_calls: root {os.fspath(root)!r} does not exist")
    project_root = find_root(Path(root))
    given = tuple(paths or ())
    missing = [p for p in given if not os.path.lexists(project_root / p)]
    if missing:  # a mistyped path would report on nothing and pass
        raise FileNotFoundError(
            f"assert_no_self_calls: {os.fspath(missing[0])!r} does not exist in the project {os.fspath(project_root)}"
        )
    codes = None
    if select is not None:
        codes = parse_codes(select if isinstance(select, str) else ",".join(select))

    def settings_for(folder: Path) -> Settings:  # a nested project's own settings govern its files
        settings = load_settings(folder)  # `select` replaces the settings' selection, extensions too
        return settings if codes is None else settings.with_overrides(select=codes, extend_select=())

    _, projects = api.grouped([project_root / p for p in given] or [project_root], settings_for)
    report = api.analyze_projects(projects, project_root)

    allowed = set(allow or ())
    findings = [
        f
        for f in report.findings
        if f.path not in allowed and allow_key(f.path, f.agent, f.method) not in allowed
    ]
    errors = [e for e in report.errors if e.fails and e.path not in allowed]
    if not findings and not errors:
        return report
    lines = []
    if findings:
        noun = "self-call" if len(findings) == 1 else "self-calls"
        lines.append(f"{len(findings)} agent {noun} found by selfcall-audit:")
        for f in findings:
            lines.append(f"  {f.path}:{f.line}:{f.column}: {f.code} {message(f)}")
            lines.append(f"      allow with: {allow_key(f.path, f.agent, f.method)!r}")
        lines.append("Migrate them with `selfcall-audit fix`.")
    if errors:
        lines.append(
            f"{plural(len(errors), 'file')} could not be analysed, so self-calls in them would go unseen:"
        )
        lines += [f"  {e.path}: {e.code} {e.message}" for e in errors]
    raise AssertionError("\n".join(lines))
