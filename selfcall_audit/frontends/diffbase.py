"""`scan --diff-base REF`: only the findings that are new against a git ref (semgrep's
`--baseline-commit`), for pull-request CI.

The ref's tree is extracted with `git archive` into a temporary folder of the system's (the user's
work tree is never written), analysed there with the run's own settings, and each finding of the
run is matched against the ref's by the baseline's fingerprint (rule, file, agent, method and the
call's text without layout), so that lines moved by unrelated edits keep a finding old.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .. import api
from ..config import Settings, load_settings
from ..ftypes import Report
from ..report.baseline import fingerprints

# A repository's own configuration must not run code while we read it (a hook, an fsmonitor).
_GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


class DiffBaseError(Exception):
    """The ref cannot be analysed (not a git checkout, an unknown ref, git failing): a usage error."""


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([*_GIT, "-C", os.fspath(cwd), *args], capture_output=True, check=False)
    except OSError as exc:
        raise DiffBaseError(f"--diff-base needs git: {exc.strerror or exc}") from None


def _said(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else f"git exited with status {result.returncode}"


def _commit(top: Path, ref: str) -> str:
    if ref.startswith("-"):  # never an option to git
        raise DiffBaseError(f"--diff-base: {ref!r} is not a git ref")
    found = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if found.returncode != 0:
        raise DiffBaseError(f"--diff-base: {ref!r} is not a commit of the repository at {top}")
    return found.stdout.decode().strip()


def _toplevel(root: Path) -> Path:
    found = _git(root, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise DiffBaseError(f"--diff-base: {root} is not in a git checkout ({_said(found)})")
    return Path(os.path.realpath(found.stdout.decode().strip()))


def _extract(top: Path, commit: str, into: Path) -> None:
    """The commit's files under `into`, streamed from `git archive` (nothing lands in the checkout)."""
    with subprocess.Popen(
        [*_GIT, "-C", os.fspath(top), "archive", "--format=tar", commit],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as git:
        try:
            with tarfile.open(fileobj=git.stdout, mode="r|") as archive:
                if hasattr(tarfile, "data_filter"):  # no member may land outside `into`
                    archive.extractall(into, filter="data")
                else:  # pragma: no cover - Python releases before the filters
                    archive.extractall(into)
        except tarfile.TarError:
            pass  # git stopped; its own message says why
        error = git.stderr.read() if git.stderr else b""
    if git.returncode != 0:
        message = error.decode("utf-8", "replace").strip().splitlines()
        raise DiffBaseError(
            f"--diff-base: git archive {commit[:12]} failed: {message[0] if message else git.returncode}"
        )


def commit_of(root: Path, ref: str) -> tuple[Path, str]:
    """The top of the git checkout holding `root`, and the commit `ref` names; a DiffBaseError
    when there is none (checked before the analysis, which may take a while)."""
    top = _toplevel(root)
    return top, _commit(top, ref)


def known_at(
    root: Path, paths: tuple[Path, ...], base: tuple[Path, str], settings_for: Callable[[Path], Settings]
) -> list[str]:
    """The fingerprints of the findings of `paths` (under the run's root `root`) as they were in
    the commit `base` (from `commit_of`), analysed with the settings the run uses now
    (`settings_for` each project of the work tree)."""
    top, commit = base
    with tempfile.TemporaryDirectory(prefix="selfcall-audit-base-") as folder:
        tree = Path(os.path.realpath(folder))
        _extract(top, commit, tree)
        base_root = tree / os.path.relpath(root, top)

        def settings_then(project: Path) -> Settings:
            now = root / os.path.relpath(project, base_root)
            settings = settings_for(now) if now.is_dir() else load_settings(project)
            return settings.with_overrides(cache_dir="")  # a cache in a folder deleted at once is waste

        inside = [base_root / os.path.relpath(os.path.abspath(p), root) for p in paths or (root,)]
        there = tuple(p for p in inside if os.path.lexists(p))
        if not base_root.is_dir() or not there:
            return []
        report = api.analyze_projects(api.Projects({base_root: there}, settings_then), base_root)
        return fingerprints(report)  # from the call texts in the tree: before it is deleted


def new_findings(report: Report, known_then: list[str]) -> tuple[Report, int]:
    """The report without the findings known then (as many of each fingerprint as there were),
    and how many were left out."""
    known = Counter(known_then)
    kept = []
    for finding, fingerprint in zip(report.findings, fingerprints(report), strict=True):
        if known[fingerprint] > 0:
            known[fingerprint] -= 1
        else:
            kept.append(finding)
    return replace(report, findings=kept), len(report.findings) - len(kept)
