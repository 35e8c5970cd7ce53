"""git's listing of a checkout's files, and the project root's discovery.

Only `os`, `select`, `fcntl` and `contextlib` (which every run loads anyway) are imported here.
git is started with `posix_spawn` where there is one, because loading `subprocess` would take a
warm run more time than git takes to list the files.
"""

from __future__ import annotations

import contextlib
import os
import select
import time

try:
    from fcntl import F_SETPIPE_SZ, fcntl
except ImportError:  # not Linux: the pipe keeps its size
    F_SETPIPE_SZ = None

# Nothing the checkout configures runs: a cloned repository's `core.fsmonitor` is a command git
# would start while listing, and hooks are off whatever git version adds one to `ls-files`.
_GIT_SAFELY = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
_GIT_LISTING = (*_GIT_SAFELY, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
_TIMEOUT = 30.0
# NeMo Gym's listing is about 220 KB: in a pipe of the default 64 KB, git would wait for the run to
# read it, which happens only once the modules have loaded; in one of 1 MB it is done by then.
_PIPE_SIZE = 1 << 20
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


class GitListing:
    """One `git ls-files` of a checkout, read when its result is wanted.

    Started before the command line's modules load (see `selfcall_audit.__main__`), git lists the
    work tree on another core meanwhile: that walk is about a sixth of a warm run's time on NeMo
    Gym, and loading the modules takes longer than it. `close` ends a git whose listing was not
    wanted (the run was for another folder, or not a scan)."""

    def __init__(self, root: str):
        self.root = root
        self._pid: int | None = None
        self._read_end = -1
        if not os.path.exists(os.path.join(root, ".git")) or not hasattr(os, "posix_spawnp"):
            return
        read_end, write_end = os.pipe()
        if F_SETPIPE_SZ is not None:
            with contextlib.suppress(OSError):  # over the system's limit for this user: as it is
                fcntl(write_end, F_SETPIPE_SZ, _PIPE_SIZE)
        null = os.open(os.devnull, os.O_RDWR)
        try:
            self._pid = os.posix_spawnp(
                "git",
                ["git", "-C", root, *_GIT_LISTING],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, write_end, 1),
                    (os.POSIX_SPAWN_DUP2, null, 2),
                ],
            )
            self._read_end = read_end
        except OSError:  # no git
            os.close(read_end)
        finally:
            os.close(write_end)
            os.close(null)

    def result(self) -> bytes | None:
        """git's NUL-separated list of the checkout's files, or None when it is not a checkout or
        git fails."""
        if self._pid is None:
            if not os.path.exists(os.path.join(self.root, ".git")):
                return None
            return _listing_by_subprocess(self.root)  # no posix_spawn on this platform
        chunks = []
        deadline = time.monotonic() + _TIMEOUT
        try:
            while select.select([self._read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = os.read(self._read_end, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            else:
                os.kill(self._pid, 9)  # SIGKILL: git hangs (a stale lock on a network drive)
        except BaseException:  # interrupted: git does not outlive the run
            self.close()
            raise
        status = self._reap()
        return b"".join(chunks) if status == 0 else None

    def close(self) -> None:
        """End git if it still runs, and let it go."""
        if self._pid is not None:
            os.kill(self._pid, 9)
            self._reap()

    def _reap(self) -> int:
        pid, self._pid = self._pid, None
        os.close(self._read_end)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)


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
