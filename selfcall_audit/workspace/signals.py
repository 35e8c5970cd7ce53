"""SIGTERM taken as an interrupt (and an interrupt Python could not raise where it came, in a
callback, sent again rather than lost), and SIGINT and SIGTERM held off while files are swapped in
whole: a write cut short by them would leave a temporary file behind, which no later run can tell
for its own. An output whose reader is gone is silenced, not reported at the interpreter's exit.

Straight from `_signal`, the module `signal` wraps: `signal` turns its constants into enums as it
loads, which took every run more time than the rest of this module."""

from __future__ import annotations

import _signal
import _thread
import contextlib
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread was, so that cleanup runs as for Ctrl-C and the run
    ends as an interrupted one does (one line said, exit 128 + 15)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def terminate_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM an interrupt, if it has its default action (a caller that set its own keeps it)
    and this is the main thread, and let no interrupt be lost (see `_interrupt_again`); the result
    puts things back."""
    sigterm = getattr(_signal, "SIGTERM", None)
    if sigterm is None or _signal.getsignal(sigterm) != _signal.SIG_DFL:
        return lambda: None
    try:
        _signal.signal(sigterm, _raise_terminated)
    except ValueError:  # not the main thread, where alone handlers can be set
        return lambda: None
    previous = sys.unraisablehook
    sys.unraisablehook = functools.partial(_interrupt_again, previous, _thread.get_ident())

    def restore() -> None:
        _signal.signal(sigterm, _signal.SIG_DFL)
        sys.unraisablehook = previous

    return restore


def _interrupt_again(
    previous: Callable[[sys.UnraisableHookArgs], object], main: int, unraisable: sys.UnraisableHookArgs
) -> None:
    """An interrupt raised where Python cannot pass it on (in a weak reference's callback or a
    finalizer, as the import system runs them) is printed as ignored and lost, and the run goes on
    to its end: the signal is sent to the main thread again instead, from a thread of its own, so
    that it acts once the main thread has left the callback (and cuts short a wait, as a signal
    does). Anything else is reported as before."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        previous(unraisable)
        return
    signum = _signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else _signal.SIGINT
    if hasattr(_signal, "pthread_kill"):
        _thread.start_new_thread(_signal.pthread_kill, (main, signum))
    else:  # Windows: no wait is cut short
        _thread.start_new_thread(_thread.interrupt_main, (signum,))


@contextlib.contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM are noted, not acted on, until the block ends (the list names those
    received); outside the main thread, where handlers cannot be set, they act as usual."""
    received: list[int] = []
    wanted = [s for s in (_signal.SIGINT, getattr(_signal, "SIGTERM", None)) if s is not None]
    try:
        previous = {s: _signal.signal(s, lambda signum, frame: received.append(signum)) for s in wanted}
    except ValueError:  # not the main thread: the first handler was refused, none was set
        yield received
        return
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            _signal.signal(signum, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """The block runs to its end; a signal that came meanwhile then acts as it would have."""
    with deferred_signals() as received:
        yield
    for signum in received[:1]:
        _signal.raise_signal(signum)


def silence(stream: io.TextIOBase) -> None:
    """The stream cannot take more: what is left in its buffer goes nowhere, not into a traceback at exit."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
