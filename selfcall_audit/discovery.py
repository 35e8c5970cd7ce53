"""Which files make up the project: the root, the file list, excludes and test code."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .config import DEFAULT_TEST_PATTERNS

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


def find_root(start: Path) -> Path:
    """Nearest ancestor (or itself) holding pyproject.toml or .git; the start folder otherwise."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
            return candidate
    return folder


def _git_files(root: Path) -> list[str] | None:
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = {name.decode("utf-8", "surrogateescape") for name in out.split(b"\0") if name}
    # The index still lists files deleted in the work tree: they are not part of what is scanned.
    return sorted(name for name in names if os.path.lexists(root / name))


def _walk_files(root: Path) -> list[str]:
    found: list[str] = []
    seen_dirs: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            stat = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        key = (stat.st_dev, stat.st_ino)
        if key in seen_dirs:  # a symlink loop or a second route to the same folder
            dirnames[:] = []
            continue
        seen_dirs.add(key)
        dirnames[:] = sorted(d for d in dirnames if d not in ALWAYS_SKIPPED_DIRS)
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def list_project_files(root: Path) -> list[str]:
    """Every file of the project, as root-relative POSIX paths (git's view when it is a checkout)."""
    files = _git_files(root)
    return files if files is not None else _walk_files(root)


def _pattern_regex(pattern: str) -> str:
    """gitignore-like: `dir/` matches a folder anywhere, a bare name any component, `a/b*` from the root."""
    body = fnmatch.translate(pattern.rstrip("/"))
    body = body[body.index(":") + 1 : body.rindex(")")] if body.startswith("(?s:") else body
    anchored = "/" in pattern.rstrip("/")
    head = "^" if anchored else "(?:^|.*/)"
    tail = "/.*" if pattern.endswith("/") else "(?:/.*)?"
    return f"{head}(?:{body}){tail}$"


@lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(_pattern_regex(p) for p in patterns), re.DOTALL)


def matches_any(rel_path: str, patterns: Iterable[str]) -> bool:
    matcher = _matcher(tuple(patterns))
    return bool(matcher and matcher.match(rel_path))


@dataclass(frozen=True)
class FileSet:
    root: Path
    sources: tuple[str, ...]  # Python files to analyse and report on
    configs: tuple[str, ...]  # YAML files that may define server instances
    modules: frozenset[str]  # every Python file, excluded ones too: imports may resolve to them


def discover(root: Path, exclude: Iterable[str], include_tests: bool, config_globs: Iterable[str]) -> FileSet:
    patterns = list(exclude)
    if not include_tests:
        patterns.extend(DEFAULT_TEST_PATTERNS)
    sources: list[str] = []
    configs: list[str] = []
    modules: set[str] = set()
    globs = tuple(config_globs)
    for rel in list_project_files(root):
        if rel.endswith(SOURCE_SUFFIXES):
            modules.add(rel)
            if not matches_any(rel, patterns):
                sources.append(rel)
        elif rel.endswith(CONFIG_SUFFIXES) and matches_any(rel, globs) and not matches_any(rel, exclude):
            configs.append(rel)
    return FileSet(root, tuple(sources), tuple(configs), frozenset(modules))


def in_scope(rel_path: str, scopes: tuple[str, ...]) -> bool:
    """Is this root-relative path one of, or inside one of, the paths the user asked about?"""
    if not scopes or "" in scopes or "." in scopes:
        return True
    return any(rel_path == s or rel_path.startswith(s.rstrip("/") + "/") for s in scopes)
