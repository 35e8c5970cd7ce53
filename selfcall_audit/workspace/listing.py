"""git's listing of a checkout's files, which can start before anything else loads.

Only `os` and `select` are imported here: the console script (`launch`) starts the listing first
thing, and git runs while Python loads the command line and the analysis. git is started with
`posix_spawn` where there is one, because loading `subprocess` would take a warm run more time
than git takes to list the files.
"""

from __future__ import annotations

import os
import select
import time

_GIT_LISTING = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
_TIMEOUT = 30.0
_started: dict[str, tuple[int, int]] = {}  # root → git's process id and the read end of its output


def project_root(start: str) -> str:
    """Nearest ancestor (or itself) holding pyproject.toml or .git; the start folder otherwise.
    Ancestors as the path is written (a file reached through a link to a folder elsewhere belongs
    to the project it was named in, not to the link's target's), the root itself resolved."""
    start = os.path.abspath(start)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    candidate = folder
    while True:
        if os.path.isfile(os.path.join(candidate, "pyproject.toml")) or os.path.exists(
            os.path.join(candidate, ".git")
        ):
            return os.path.realpath(candidate)
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return os.path.realpath(folder)
        candidate = parent


def _is_checkout(root: str) -> bool:
    return os.path.exists(os.path.join(root, ".git"))


def start_listing(root: str) -> None:
    """Start git's listing of the checkout at `root` (if it is one), to be collected later."""
    if root in _started or not hasattr(os, "posix_spawnp") or not _is_checkout(root):
        return
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
        return
    finally:
        os.close(write_end)
        os.close(null)
    _started[root] = (pid, read_end)


def git_listing(root: str) -> bytes | None:
    """git's NUL-separated list of the checkout's files, or None when it is not a checkout or git
    fails; started now unless it already was."""
    if not hasattr(os, "posix_spawnp"):
        return _listing_by_subprocess(root) if _is_checkout(root) else None
    start_listing(root)
    started = _started.pop(root, None)
    if started is None:
        return None
    pid, read_end = started
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
