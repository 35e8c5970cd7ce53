"""How a run that did not end normally is told: an interrupt anywhere in the exception chain, an
output that cannot be written, and an internal error, each in one short line."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable

from ..workspace.signals import Terminated, silence
from .commands import EXIT_ERROR, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_TERMINATED, OutputFailed, say

_MAX_ERROR_TEXT = 300  # an internal error's message beyond this is cut (the whole of it under -v)


class Stopped(Exception):
    """The run stops here, whatever comes next (another project of a `fix`): what the user is
    told, and the exit status `main` returns for it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def interrupted(exc: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt anywhere in the exception's chain (a worker's, a library's wrapper)."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):
            return current
        stack += [current.__cause__, current.__context__, *getattr(current, "exceptions", ())]
    return None


def output_failed(exc: BaseException) -> OSError | None:
    """The error of writing the results (`> /dev/full`, a closed pipe): the user's stream, not ours."""
    if isinstance(exc, OutputFailed):
        return exc.error
    if isinstance(exc, BrokenPipeError) or (
        isinstance(exc, OSError)
        and exc.filename is None
        and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EIO)
    ):
        return exc
    return None


def internal_error(exc: BaseException, verbose: bool) -> int:
    if verbose or os.environ.get("SELFCALL_AUDIT_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(text) > _MAX_ERROR_TEXT:
        text = f"{text[:_MAX_ERROR_TEXT]}... ({len(text) - _MAX_ERROR_TEXT:,} more characters)"
    say(f"selfcall-audit: internal error: {text}")
    say("Please report it with the command you ran (add -v for the traceback).")
    return EXIT_ERROR


def finish(run: Callable[[], int], verbose: Callable[[], bool]) -> int:
    """The exit code of `run`, or of the way it ended: a stop it said why, an interrupt, results
    that could not be written, an internal error (with its traceback when `verbose()`)."""
    try:
        code = run()
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        if isinstance(exc, Stopped):
            say(exc.message)
            return exc.status
        interrupt = interrupted(exc)
        if interrupt is not None:
            say("selfcall-audit: interrupted")
            return EXIT_TERMINATED if isinstance(interrupt, Terminated) else EXIT_INTERRUPTED
        failed = output_failed(exc)
        if failed is not None and failed.filename is not None:  # -o FILE
            say(f"selfcall-audit: cannot write the results to {failed.filename}: {failed.strerror or failed}")
            return EXIT_ERROR
        if failed is not None:
            silence(sys.stdout)
            if isinstance(failed, BrokenPipeError):  # the reader went away (`| head`): it saw enough
                return EXIT_FINDINGS
            say(f"selfcall-audit: cannot write the results: {failed.strerror or failed}")
            return EXIT_ERROR
        if not isinstance(exc, Exception):
            raise
        return internal_error(exc, verbose())
    try:
        sys.stdout.flush()
    except OSError as exc:
        silence(sys.stdout)
        if not isinstance(exc, BrokenPipeError):
            say(f"selfcall-audit: cannot write the results: {exc.strerror or exc}")
            return EXIT_ERROR
        return code or EXIT_FINDINGS
    return code
