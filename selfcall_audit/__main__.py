"""The console script and `python -m selfcall_audit`: the command line of `frontends.cli` (the
plain scans of pre-commit and CI through `frontends.quick`)."""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # before any module of ours loads: a run's time counts its start-up

import os  # noqa: E402
import sys  # noqa: E402

# `python -m` puts the current folder first on the module path, where a scanned checkout's
# `click.py` (or `select.py`, shadowing the standard library) would be imported in place of the
# real module: the tool never runs code of what it scans, so that entry goes before anything else
# is imported. (The console script's first entry is its own folder, left alone.)
if __name__ == "__main__" and sys.path:
    try:
        if sys.path[0] in ("", os.getcwd()):
            del sys.path[0]
    except OSError:  # the current folder is gone, and `python -m` put nothing in its place
        pass

import contextlib  # noqa: E402
import gc  # noqa: E402

from .workspace.listing import GitListing, project_root  # noqa: E402
from .workspace.signals import Terminated, silence, terminate_as_interrupt  # noqa: E402


def run() -> None:
    """`frontends.quick` for the command lines it reads, else `frontends.cli.main`.

    git starts listing the current folder's project before the command line's modules load, so it
    walks the work tree on another core meanwhile (on NeMo Gym the walk is about a sixth of a warm
    scan); a run that wants another listing, or none, ends it."""
    early = None
    terminate_as_interrupt()  # SIGTERM stops the run as Ctrl-C does: cleaned up, one line said
    # The facts are hundreds of thousands of small objects that live to the end of the run and
    # form no cycles: every collection walks them again for nothing (a fifth of an edited agent's
    # one-file scan of NeMo Gym went to loading the cache while collections ran; a sixth of a cold
    # scan at CPython's default thresholds). Off for this process only: a library caller (flake8,
    # an editor, a test) keeps its own. A run's cyclic garbage stays small (peak memory of a cold
    # scan and of `fix` on NeMo Gym within 3% with collections on), and the process ends with it.
    gc.disable()
    # The results in UTF-8 whatever the locale says (PYTHONIOENCODING, a Windows code page when
    # redirected), as `-o FILE` writes them and JSON, SARIF and JUnit's XML declare: not a crash on ❱.
    with contextlib.suppress(AttributeError, ValueError):  # a stream that is not a plain text file
        sys.stdout.reconfigure(encoding="utf-8", errors="surrogateescape")
    try:
        with contextlib.suppress(OSError):  # the current folder is gone: `main` says so
            early = GitListing(project_root(os.getcwd()))
        # The command line's modules load now, on this core, while git walks the tree on the
        # other: loaded before git starts, a warm scan of NeMo Gym waited for git 20 to 30 ms
        # longer (wall clock). click loads only for the command lines `quick` does not read
        # (`benchmarks/scan_vs_peers.py` shows what a one-file scan pays for it).
        from .frontends.quick import quick_scan

        code = quick_scan(sys.argv[1:], early, STARTED)
        if code is None:
            from .frontends.cli import main

            code = main(early=early, started=STARTED)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM while the modules load; `main` handles it after
        sys.stderr.write("selfcall-audit: interrupted\n")
        code = 143 if isinstance(exc, Terminated) else 130  # EXIT_TERMINATED, EXIT_INTERRUPTED
    finally:
        if early is not None:
            early.close()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # main has told the user already; what is left has nowhere to go, not
            silence(stream)  # into an "Exception ignored" at the interpreter's exit
            code = code or 2  # EXIT_ERROR
    # What the run built lives to its end: the interpreter's exit frees it, but its last full
    # collection walking all of it first cost an edited agent's one-file scan of NeMo Gym a fifth
    # of its CPU. Frozen, the objects are out of that collection's sight.
    gc.freeze()
    # A KeyboardInterrupt raised in code run from a string (as `dataclasses` and `namedtuple`
    # define methods while modules load) stays marked unhandled in CPython once caught: at exit
    # the process would kill itself with SIGINT instead of returning `code`. Running a string
    # clears the mark.
    exec("")
    sys.exit(code)


if __name__ == "__main__":
    run()
