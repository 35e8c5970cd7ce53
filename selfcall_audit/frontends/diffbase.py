"""`scan --diff-base REF`: only the findings that are new against a git ref (semgrep's
`--baseline-commit`), for pull-request CI.

The ref's files are written from git's object store into a temporary folder, in memory where the
system has room there (the user's work tree is never written), and analysed there with the run's
own settings and the work tree's cache, read and never written: its entries are keyed by path and
content, so a file the ref shares with the work tree is not parsed again, and a ref whose files are
all the work tree's gets the run's own result. Each finding of the run is matched against the ref's
by the baseline's fingerprint (rule, file, agent, method and the call's text without layout), so
that lines moved by unrelated edits keep a finding old.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from .. import api
from ..config import Settings, load_settings
from ..ftypes import Report
from ..report.baseline import fingerprints, unmatched
from ..workspace.discovery import PYPROJECT

# A repository's own configuration must not run code while we read it (a hook, an fsmonitor).
_GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
_READ = (".py", ".yaml", ".yml")  # what discovery lists, with pyproject.toml: the rest is not extracted
# Where the ref's files go unless TMPDIR names a place: a folder in memory (Linux's), when it has
# room for twice their size. Creating NeMo Gym's 2,159 files on a slow disk was most of a run: 3.3 s
# against 0.53 s in memory.
_MEMORY = "/dev/shm"


class DiffBaseError(Exception):
    """The ref cannot be analysed (not a git checkout, an unknown ref, git failing): a usage error."""


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([*_GIT, "-C", os.fspath(cwd), *args], capture_output=True, check=False)
    except OSError as exc:
        raise DiffBaseError(f"--diff-base needs git: {exc.strerror or exc}") from None


def _said(stderr: bytes, status: int | None) -> str:
    """What git said of its failure: the first line of its stderr, else its exit status."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else f"git exited with status {status}"


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
        raise DiffBaseError(
            f"--diff-base: {root} is not in a git checkout ({_said(found.stderr, found.returncode)})"
        )
    return Path(os.path.realpath(found.stdout.decode().strip()))


def _wanted(commit: str, top: Path, under: str) -> list[tuple[str, str, int]]:
    """The object id, path and size of each file of the commit the analysis reads (Python, YAML,
    pyproject.toml) below `under` ("" for all of it): plain files only, not links or submodules."""
    listed = _git(top, "ls-tree", "-r", "-z", "-l", "--full-tree", commit, "--", under or ".")
    if listed.returncode != 0:
        raise DiffBaseError(
            f"--diff-base: cannot list {commit[:12]}: {_said(listed.stderr, listed.returncode)}"
        )
    wanted = []
    for entry in listed.stdout.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        path = os.fsdecode(name)
        fields = meta.split()
        if fields[:2] in ([b"100644", b"blob"], [b"100755", b"blob"]) and (
            path.endswith(_READ) or path.rsplit("/", 1)[-1] == PYPROJECT
        ):
            size = int(fields[3]) if fields[3].isdigit() else 0  # "BAD": a blob the clone lacks
            wanted.append((fields[2].decode(), path, size))
    return wanted


def _in_memory(wanted: list[tuple[str, str, int]]) -> str | None:
    """The folder in memory for these files, if there is one with room for twice them (their bytes
    and their number) and TMPDIR names no other place; else None: the system's temporary folder."""
    if os.environ.get("TMPDIR"):
        return None
    try:
        room = os.statvfs(_MEMORY)
    except (OSError, AttributeError):  # no such folder; no statvfs (Windows)
        return None
    size = sum(size for _, _, size in wanted)
    if room.f_bavail * room.f_frsize < 2 * size or room.f_favail < 2 * len(wanted):
        return None
    return _MEMORY if os.access(_MEMORY, os.W_OK | os.X_OK) else None


@contextlib.contextmanager
def _written(top: Path, commit: str, under: str) -> Iterator[Path]:
    """A temporary folder holding those files of the commit, deleted after: in memory if it has
    room (see `_in_memory`), else, or when it fills up meanwhile, the system's temporary folder."""
    wanted = _wanted(commit, top, under)
    for place in dict.fromkeys((_in_memory(wanted), None)):
        with tempfile.TemporaryDirectory(prefix="selfcall-audit-base-", dir=place) as folder:
            tree = Path(os.path.realpath(folder))
            try:
                _extract(top, commit, wanted, tree)
            except OSError as exc:
                if place is None or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                continue  # full: the files go to the system's temporary folder instead
            yield tree
            return


def _extract(top: Path, commit: str, wanted: list[tuple[str, str, int]], into: Path) -> None:
    """Those files of the commit, written below `into` from git's object store (`cat-file --batch`)
    as git hands them over: it reads the next blobs on another core while these are written."""
    with tempfile.TemporaryFile() as asked, tempfile.TemporaryFile() as said:
        asked.write(b"".join(f"{oid}\n".encode() for oid, _, _ in wanted))
        asked.seek(0)  # from a file, not a pipe: git never waits for us to read before it reads on
        try:
            git = subprocess.Popen(
                [*_GIT, "-C", os.fspath(top), "cat-file", "--batch"],
                stdin=asked,
                stdout=subprocess.PIPE,
                stderr=said,
            )
        except OSError as exc:
            raise DiffBaseError(f"--diff-base needs git: {exc.strerror or exc}") from None
        with git:
            blobs: IO[bytes] = git.stdout  # type: ignore[assignment]
            made = set()  # folders: made once each, not once per file (a tenth of a second on NeMo Gym)
            stopped = False
            for _, path, _ in wanted:
                header = blobs.readline().split()
                if not header:  # git stopped: its status and its stderr say why
                    stopped = True
                    break
                if len(header) < 3 or header[1] != b"blob":  # `<oid> missing`: a partial clone lacks it
                    raise DiffBaseError(
                        f"--diff-base: {path} of {commit[:12]} is not in the clone (git fetch it)"
                    )
                target = into / path
                if target.parent not in made:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    made.add(target.parent)
                target.write_bytes(blobs.read(int(header[2])))
                blobs.read(1)  # the newline after each blob
        if git.returncode != 0 or stopped:
            said.seek(0)
            raise DiffBaseError(
                f"--diff-base: cannot read {commit[:12]}: {_said(said.read(), git.returncode)}"
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
    under = os.path.relpath(root, top).replace(os.sep, "/")
    with _written(top, commit, "" if under == "." else under) as tree:
        base_root = tree / under

        def now(project: Path) -> Path | None:
            """The work tree's folder for a project of the ref's tree, if there is one."""
            folder = root / os.path.relpath(project, base_root)
            return folder if folder.is_dir() else None

        def settings_then(project: Path) -> Settings:
            folder = now(project)
            if folder is not None:
                return settings_for(folder)  # its cache read, never written: the run's analysis filled it
            # a project the work tree lacks: a cache in a folder deleted at once is waste
            return load_settings(project).with_overrides(cache_dir="")

        inside = [base_root / os.path.relpath(os.path.abspath(p), root) for p in paths or (root,)]
        there = tuple(p for p in inside if os.path.lexists(p))
        if not base_root.is_dir() or not there:
            return []
        report = api.analyze_projects(api.Projects({base_root: there}, settings_then, now), base_root)
        return fingerprints(report)  # from the call texts in the tree: before it is deleted


def new_findings(report: Report, known_then: list[str]) -> tuple[Report, int]:
    """The report without the findings known then (as many of each fingerprint as there were),
    and how many were left out."""
    kept = unmatched(report, Counter(known_then))
    return report._replace(findings=kept), len(report.findings) - len(kept)
