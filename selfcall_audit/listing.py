"""git's listing of a checkout's files, which can start before anything else loads.

Only `os` and `subprocess` are imported here: the console script (`launch`) starts the listing
first thing, and git runs while Python loads the command line and the analysis.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

_GIT_LISTING = ("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
_started: dict[str, subprocess.Popen[bytes]] = {}


def project_root(start: str) -> str:
    """Nearest ancestor (or itself) holding pyproject.toml or .git; the start folder otherwise."""
    start = os.path.realpath(start)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    candidate = folder
    while True:
        if os.path.isfile(os.path.join(candidate, "pyproject.toml")) or os.path.exists(
            os.path.join(candidate, ".git")
        ):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return folder
        candidate = parent


def start_listing(root: str) -> None:
    """Start git's listing of the checkout at `root` (if it is one), to be collected later."""
    if root not in _started and os.path.exists(os.path.join(root, ".git")):
        with contextlib.suppress(OSError):
            _started[root] = subprocess.Popen(
                _GIT_LISTING,
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )


def git_listing(root: str) -> bytes | None:
    """git's NUL-separated list of the checkout's files, or None when it is not a checkout or git
    fails; started now unless it already was."""
    start_listing(root)
    process = _started.pop(root, None)
    if process is None:
        return None
    try:
        out, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    return out if process.returncode == 0 else None
