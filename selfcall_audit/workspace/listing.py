"""git's listing of a checkout's files, and the project root's discovery.

Only `os` and `select` are imported here. git is started with `posix_spawn` where there is one,
because loading `subprocess` would take a warm run more time than git takes to list the files.
"""

from __future__ import annotations

import os
import select
import time

_GIT_LISTING = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
_TIMEOUT = 30.0
_MARKERS = ("pyproject.toml", ".git")


def is_project_root(folder: str) -> bool:
    """Does the folder hold pyproject.toml or .git (a folder, or a file in a git worktree)?"""
    return os.path.isfile(os.path.join(folder, _MARKERS[0])) or os.path.exists(
        os.path.join(folder, _MARKERS[1])
    )


def project_root(start: str) -> str:
    """Nearest ancestor (or itself) holding pyproject.toml or .git; the start folder otherwise.

    Ancestors as the path is written (a file reached through a link to a folder elsewhere belongs
    to the project it was named in, not to the link's target's), the root itself resolved. A path
    that is not a folder (a file, a broken link, a link loop) starts from the folder holding it."""
    start = os.path.abspath(start)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    candidate = folder
    while True:
        if is_project_root(candidate):
            return os.path.realpath(candidate)
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return os.path.realpath(folder)
        candidate = parent


def git_listing(root: str) -> bytes | None:
    """git's NUL-separated list of the checkout's files, or None when it is not a checkout or git
    fails."""
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    if not hasattr(os, "posix_spawnp"):
        return _listing_by_subprocess(root)
    read_end, write_end = os.pipe()
    null = os.open(os.devnull, os.O_RDWR)
    try:
        pid = os.posix_spawnp(
            "git",
            ["git", "-C", root, *_GIT_LISTING],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, null, 0),
                (os.POSIX_SPAWN_DUP2, write_end, 1),
                (os.POSIX_SPAWN_DUP2, null, 2),
            ],
        )
    except OSError:  # no git
        os.close(read_end)
        return None
    finally:
        os.close(write_end)
        os.close(null)
    chunks = []
    deadline = time.monotonic() + _TIMEOUT
    try:
        while select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, 9)  # SIGKILL: git hangs (a stale lock on a network drive)
    except BaseException:  # interrupted: git does not outlive the run
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None


def _listing_by_subprocess(root: str) -> bytes | None:
    import subprocess

    try:
        done = subprocess.run(
            ["git", *_GIT_LISTING],
            cwd=root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
