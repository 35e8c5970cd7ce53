"""Signals where worker processes run: the parent stops them, they never outlive it.

A worker ignores SIGINT (Ctrl-C reaches the whole process group; the parent, which handles it,
shuts the pool down), and the parent takes SIGTERM as an interrupt while its workers run, so
that shutting the pool down joins them instead of leaving them behind, reparented to init.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread was, so that cleanup runs as for Ctrl-C."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def worker_started(parent: int) -> None:
    """In each worker process, first thing. On Linux the system also stops the worker when its
    parent dies, even by SIGKILL, which no handler sees."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            pr_set_pdeathsig = 1
            ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before that took effect
            os._exit(1)


def stop_workers_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM an interrupt while workers run, if it has its default action (a caller that
    set its own keeps it); the result puts things back."""
    sigterm = getattr(signal, "SIGTERM", None)
    if (
        sigterm is None
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(sigterm) is not signal.SIG_DFL
    ):
        return lambda: None
    signal.signal(sigterm, _raise_terminated)
    return lambda: signal.signal(sigterm, signal.SIG_DFL)
