"""`scan` as pre-commit and CI run it, without loading click.

Loading click costs a warm scan of NeMo Gym about a quarter of its time: measured side by side,
0.127 s without it and 0.159 s with it, where ruff's warm lint takes 0.106 s and the target is
1.6x ruff's. So the command lines the hook and CI jobs use, `scan` and `scan --format FORMAT`, with
or without paths, go straight to `commands.scan` with the defaults of every other option. Any
other command line (another option, `--help`, a path starting with `-`, a format click would
refuse) goes to `cli.main`, whose declarations stay the one description of the command line; the
tests check that both read these command lines alike.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..report import FORMATS
from ..workspace.listing import GitListing
from . import commands
from .ending import finish


def scan_arguments(argv: list[str]) -> tuple[tuple[Path, ...], str | None] | None:
    """The paths and the format of a `scan [--format FORMAT] [PATHS]...` command line, or None for
    any other command line."""
    if not argv or argv[0] != "scan":
        return None
    paths: list[Path] = []
    output_format = None
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "--format":
            arg = "--format=" + next(rest, "")
        if arg.startswith("--format="):
            output_format = arg.removeprefix("--format=")
            if output_format not in FORMATS:
                return None
        elif arg.startswith("-"):
            return None
        else:
            paths.append(Path(arg))
    return tuple(paths), output_format


def quick_scan(argv: list[str], early: GitListing | None, started: float | None = None) -> int | None:
    """The exit code of a command line `scan_arguments` reads, or None: `cli.main` runs it."""
    arguments = scan_arguments(argv)
    if arguments is None:
        return None
    paths, output_format = arguments
    common = commands.Common(time.perf_counter() if started is None else started, paths, early=early)

    def run() -> int:
        try:
            return commands.scan(common, commands.ScanOptions(output_format=output_format))
        except commands.SettingsError as exc:  # not the command line's: one line
            commands.say(f"selfcall-audit: error: {exc}")
            return commands.EXIT_ERROR
        except commands.UsageError as exc:  # said as click says it, with the command's usage
            from .cli import usage_error

            return usage_error(argv, str(exc))

    return finish(run, lambda: False)
