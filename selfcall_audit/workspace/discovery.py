"""Which files make up the project: the root, the file list, excludes and test code; reading them safely."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..config import DEFAULT_TEST_PATTERNS, declares_settings
from ..ftypes import InputError
from .listing import GitListing, is_project_root, project_root

if TYPE_CHECKING:
    from ..ftypes import ErrorKind

ALWAYS_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".selfcall_audit_cache",
        "build",
        "dist",
        "site-packages",
    }
)
SOURCE_SUFFIXES = (".py",)
CONFIG_SUFFIXES = (".yaml", ".yml")
READ_SUFFIXES = SOURCE_SUFFIXES + CONFIG_SUFFIXES
_READ_SUFFIXES = tuple(s.encode() for s in READ_SUFFIXES)
PYPROJECT = "pyproject.toml"  # listed too: one below the root may make a nested project


def find_root(start: Path) -> Path:
    """The project a path belongs to: the nearest folder at or above it whose pyproject.toml holds
    [tool.selfcall-audit], looked for no higher than the repository's top (the first folder with
    .git); without one, the nearest folder holding a pyproject.toml or .git; the start folder
    otherwise. Ancestors as the path is written, the root itself resolved."""
    start_path = os.path.abspath(start)
    folder = start_path if os.path.isdir(start_path) else os.path.dirname(start_path)
    while True:
        if declares_settings(Path(folder, PYPROJECT)):
            return Path(os.path.realpath(folder))
        parent = os.path.dirname(folder)
        if parent == folder or os.path.exists(os.path.join(folder, ".git")):
            return Path(project_root(start_path))
        folder = parent


def _git_files(root: Path, early: GitListing | None) -> list[str] | None:
    listing = early if early is not None and early.root == os.fspath(root) else GitListing(os.fspath(root))
    out = listing.result()
    if out is None:
        return None
    return sorted(
        {
            name.decode("utf-8", "surrogateescape")
            for name in out.split(b"\0")
            if name.endswith(_READ_SUFFIXES) or name.endswith(b"/pyproject.toml")
        }
    )


# A folder that no pyproject.toml or .git marks as a project (`/`, a home folder) is walked this
# far only: the front ends warn that there is no project root, and the listing stops with an entry.
UNROOTED_FOLDER_LIMIT = 5_000


def _walk_files(root: Path, errors: dict[str, InputError]) -> list[str]:
    """Every Python and YAML file under the root, following symbolic links that stay inside it, each
    folder once."""
    found: list[str] = []
    seen_dirs: set[tuple[int, int]] = set()
    limit = None if is_project_root(os.fspath(root)) else UNROOTED_FOLDER_LIMIT
    real_root = os.path.realpath(root)

    def unlisted(exc: OSError) -> None:
        rel = os.path.relpath(exc.filename, root).replace(os.sep, "/") if exc.filename else "."
        errors[rel] = InputError(rel, f"cannot list the folder: {exc.strerror or exc}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted, followlinks=True):
        try:
            stat_result = os.stat(dirpath)
        except OSError as exc:
            unlisted(exc)
            dirnames[:] = []
            continue
        key = (stat_result.st_dev, stat_result.st_ino)
        if key in seen_dirs:  # a symlink loop or a second route to the same folder
            dirnames[:] = []
            continue
        seen_dirs.add(key)
        if limit is not None and len(seen_dirs) > limit:
            errors["."] = InputError(
                ".",
                f"stopped listing after {limit:,} folders: no pyproject.toml or .git marks this folder "
                "as a project root; run from the project's folder",
            )
            break
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in ALWAYS_SKIPPED_DIRS and _stays_inside(os.path.join(dirpath, d), real_root)
        )
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            if name.endswith(READ_SUFFIXES) or (name == PYPROJECT and rel_dir != "."):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def _stays_inside(folder: str, real_root: str) -> bool:
    """A symbolic link to a folder outside the root (`/`, a virtualenv) is not part of the project."""
    if not os.path.islink(folder):
        return True
    target = os.path.realpath(folder)
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


# A file changed less than this before it was listed may change again within the same tick of its
# file system's clock (two seconds on FAT) and keep the status it was listed with: its status is
# not one a later run can trust.
SETTLE_NS = 2_000_000_000

Status = tuple[int, int, int, int, int]  # size, modification and change times, inode, device


def list_project_files(
    root: Path, early: GitListing | None = None
) -> tuple[dict[str, Status | None], dict[str, InputError]]:
    """Every Python and YAML file of the project, and every pyproject.toml below its root, as
    root-relative POSIX paths (git's view when it is a checkout; `early`, git started before, is
    used if it is for this root) with its status if it has settled (see `FileSet.statuses`), and
    the folders that could not be listed, with the reason."""
    errors: dict[str, InputError] = {}
    names = _git_files(root, early)
    if names is None:
        names = _walk_files(root, errors)
    # The change time is the kernel's clock at the file's last change, whatever `cp -p`, `rsync -t`,
    # `touch` or a fixed SOURCE_DATE_EPOCH do to the modification time; Windows reports the creation
    # time in its place, which an edit keeps: no status is trusted there.
    settled_before = time.time_ns() - SETTLE_NS if os.name == "posix" else -1
    prefix = f"{root}{os.sep}"
    listed: dict[str, Status | None] = {}
    for name in names:
        try:
            status = os.stat(prefix + name)
        except OSError:
            # git's index still lists files deleted in the work tree: they are not scanned; one
            # that is there but cannot be looked at is, and reading it will say why.
            if os.path.lexists(prefix + name):
                listed[name] = None
            continue
        changed = status.st_ctime_ns
        listed[name] = (
            (status.st_size, status.st_mtime_ns, changed, status.st_ino, status.st_dev)
            if changed < settled_before
            else None
        )
    return listed, errors


class UnreadableFile(Exception):
    """A listed file whose bytes cannot be had: reported as SCA900, and the scan goes on."""

    def __init__(self, message: str, kind: ErrorKind = "unreadable"):
        super().__init__(message)
        self.kind = kind

    def entry(self, path: str) -> InputError:
        return InputError(path, str(self), self.kind)


class TooLarge(UnreadableFile):
    """A file over the max-file-size limit: skipped for its size, whatever it holds."""

    def __init__(self, size: int, max_size: int):
        super().__init__(
            f"skipped: {size:,} bytes is over the max-file-size limit of {max_size:,}", "too_large"
        )
        self.size = size


_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def _read_up_to(fd: int, size: int) -> bytes:
    """`size` bytes, or fewer at the end of the file. Straight from the descriptor: every run reads
    every source file (their content keys), and a buffered file object around each made reading
    NeMo Gym's a third slower."""
    data = os.read(fd, size)
    while 0 < len(data) < size and (more := os.read(fd, size - len(data))):
        data += more
    return data


def read_file(path: str | Path, max_size: int) -> bytes:
    """The bytes of a regular file of at most `max_size` bytes, else UnreadableFile with the reason.

    Opened without blocking, so a named pipe posing as a source file cannot hang the scan, and
    judged on the open descriptor, so a file replaced after it was listed is judged by what is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise UnreadableFile("broken symbolic link: its target does not exist") from None
        raise UnreadableFile("file vanished during the scan") from None
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        kind = next((name for is_kind, name in _NOT_REGULAR if is_kind(status.st_mode)), None)
        if kind is not None:
            raise UnreadableFile(f"not a regular file: {kind}")
        data = b""
        if status.st_size <= max_size:
            # As much as fstat said and one byte more (asking for the cap would allocate it for
            # every file); only a file that grew since is read on, up to one byte over the cap.
            data = _read_up_to(fd, status.st_size + 1)
            if len(data) > status.st_size:
                data += _read_up_to(fd, max_size + 1 - len(data))
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    size = max(status.st_size, len(data))
    if size > max_size:
        raise TooLarge(size, max_size)
    return data


def _pattern_regex(pattern: str) -> str:
    """gitignore-like: `dir/` matches a folder anywhere, a bare name any component, `a/b*` from the root."""
    body = fnmatch.translate(pattern.rstrip("/"))
    body = body[body.index(":") + 1 : body.rindex(")")] if body.startswith("(?s:") else body
    anchored = "/" in pattern.rstrip("/")
    head = "^" if anchored else "(?:^|.*/)"
    tail = "/.*" if pattern.endswith("/") else "(?:/.*)?"
    return f"{head}(?:{body}){tail}$"


def _matcher(patterns: Iterable[str]) -> Callable[[str], object]:
    """Does a root-relative path match one of the patterns? (A match object or None.)"""
    patterns = tuple(patterns)
    if not patterns:
        return lambda rel_path: None
    return re.compile("|".join(_pattern_regex(p) for p in patterns), re.DOTALL).match


def test_code_matcher() -> Callable[[str], object]:
    """Is a root-relative path test code, by the patterns a scan leaves out unless told otherwise?"""
    return _matcher(DEFAULT_TEST_PATTERNS)


class FileSet(NamedTuple):
    root: Path
    sources: tuple[str, ...]  # Python files to analyse and report on
    configs: tuple[str, ...]  # YAML files that may define server instances
    modules: frozenset[str]  # every Python file, excluded ones too: imports may resolve to them
    errors: dict[str, InputError]  # folders that could not be listed
    # The status of each listed file as it was before any was read, if it changed long enough before
    # to be compared with a later run's (`SETTLE_NS`): the same status, the same bytes.
    statuses: dict[str, Status]
    projects: tuple[str, ...] = ()  # folders of nested projects, whose files are theirs, not ours


def nested_projects(
    root: Path, pyprojects: Iterable[str], skipped: Callable[[str], object]
) -> tuple[str, ...]:
    """The outermost folders below the root whose pyproject.toml holds [tool.selfcall-audit]: each
    is a project of its own, unless it lies where this project does not look (its excludes, and
    test code unless tests are included: a test fixture shaped like a project stays a fixture).
    A pyproject.toml without that table is not a config file, as for ruff: its folder stays part
    of this project."""
    found: list[str] = []
    for rel in sorted(pyprojects):
        folder = rel[: -len(PYPROJECT) - 1]
        if found and rel.startswith(tuple(f"{f}/" for f in found)):
            continue
        if not skipped(rel) and declares_settings(root / rel):
            found.append(folder)
    return tuple(found)


def discover(
    root: Path,
    exclude: Iterable[str],
    include_tests: bool,
    config_globs: Iterable[str],
    nested: bool = False,
    early: GitListing | None = None,
) -> FileSet:
    """The project's files; with `nested`, without the files of the nested projects it holds;
    `early`: git's listing, started before."""
    exclude = tuple(exclude)
    skipped = _matcher(exclude if include_tests else (*exclude, *DEFAULT_TEST_PATTERNS))
    is_config, config_skipped = _matcher(config_globs), _matcher(exclude)
    sources: list[str] = []
    configs: list[str] = []
    modules: set[str] = set()
    pyprojects: list[str] = []
    listed, errors = list_project_files(root, early)
    statuses = {rel: status for rel, status in listed.items() if status is not None}
    for rel in listed:
        if rel.endswith(SOURCE_SUFFIXES):
            modules.add(rel)  # a nested project's modules too: imports may resolve to them
            if not skipped(rel):
                sources.append(rel)
        elif rel.endswith(CONFIG_SUFFIXES):
            if is_config(rel) and not config_skipped(rel):
                configs.append(rel)
        elif rel.endswith(f"/{PYPROJECT}"):
            pyprojects.append(rel)
    projects = nested_projects(root, pyprojects, skipped) if nested else ()
    if projects:  # their files are theirs
        theirs = tuple(f"{folder}/" for folder in projects)
        sources = [rel for rel in sources if not rel.startswith(theirs)]
        configs = [rel for rel in configs if not rel.startswith(theirs)]
    return FileSet(root, tuple(sources), tuple(configs), frozenset(modules), errors, statuses, projects)


def in_scope(rel_path: str, scopes: tuple[str, ...]) -> bool:
    """Is this root-relative path one of, or inside one of, the paths the user asked about?"""
    if not scopes or "" in scopes or "." in scopes:
        return True
    return any(rel_path == s or rel_path.startswith(s.rstrip("/") + "/") for s in scopes)
