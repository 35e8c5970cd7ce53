"""One `fix` at a time writes to a project: another run of it on the same project waits.

Without it, a run whose rewrites were all refused (the files changed under it, by the other run)
removes the helper copy it wrote, which the other run's rewritten files import. The lock is the
project root folder's own (`flock` on it): nothing is created for it, and the system releases
it when the process ends, however it ends. Where `flock` is missing (Windows), runs are not
serialised.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def project_lock(root: Path) -> Iterator[None]:
    """Hold the project's write lock for the block, waiting for another run that holds it."""
    if fcntl is None:
        yield
        return
    descriptor = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock
