"""SIGTERM taken as an interrupt, and SIGINT and SIGTERM held off while files are swapped in whole:
a write cut short by them would leave a temporary file behind, which no later run can tell for its
own. An output whose reader is gone is silenced, not reported at the interpreter's exit."""

from __future__ import annotations

import contextlib
import io
import os
import signal
from collections.abc import Callable, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread was, so that cleanup runs as for Ctrl-C and the run
    ends as an interrupted one does (one line said, exit 128 + 15)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def terminate_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM an interrupt, if it has its default action (a caller that set its own keeps it)
    and this is the main thread; the result puts things back."""
    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is None or signal.getsignal(sigterm) is not signal.SIG_DFL:
        return lambda: None
    try:
        signal.signal(sigterm, _raise_terminated)
    except ValueError:  # not the main thread, where alone handlers can be set
        return lambda: None
    return lambda: signal.signal(sigterm, signal.SIG_DFL)


@contextlib.contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM are noted, not acted on, until the block ends (the list names those
    received); outside the main thread, where handlers cannot be set, they act as usual."""
    received: list[int] = []
    wanted = [s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None]
    try:
        previous = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in wanted}
    except ValueError:  # not the main thread: the first handler was refused, none was set
        yield received
        return
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """The block runs to its end; a signal that came meanwhile then acts as it would have."""
    with deferred_signals() as received:
        yield
    for signum in received[:1]:
        signal.raise_signal(signum)


def silence(stream: io.TextIOBase) -> None:
    """The stream cannot take more: what is left in its buffer goes nowhere, not into a traceback at exit."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
