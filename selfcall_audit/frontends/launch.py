"""The console script. It starts git's listing of the project before anything else loads, and runs
`scan` without click when its arguments are plain (file names and options spelled out, as
pre-commit and CI pass them): loading click takes about as long as a warm scan's analysis. Any
other command line, and any usage error, goes to click (`cli`), which then reads it whole."""

from __future__ import annotations

import codecs
import os
import sys
from pathlib import Path

from ..report import FORMATS
from ..workspace.listing import project_root, start_listing

_LISTING_COMMANDS = ("scan", "fix", "agents")

# `scan`'s parameters as `cli` declares them; tests/test_launch.py holds the two in step.
_FLAGS = {
    "--include-tests": "include_tests",
    "--no-cache": "no_cache",
    "-q": "quiet",
    "--quiet": "quiet",
    "-v": "verbose",
    "--verbose": "verbose",
    "--strict": "strict",
}
_VALUES = {
    "--config": "config_file",
    "--exclude": "exclude",
    "--jobs": "jobs",
    "--format": "output_format",
    "--select": "select",
    "--ignore": "ignore",
    "--baseline": "baseline_file",
    "--write-baseline": "write_baseline",
}
_FILES = ("config_file", "baseline_file", "write_baseline")


def scan_parameters(args: list[str]) -> dict[str, object] | None:
    """`scan`'s parameters as click would read them from `args`, or None when reading them needs
    click: help, an error to report, or a form this reader does not take."""
    params: dict[str, object] = {
        "paths": [],
        "config_file": None,
        "exclude": [],
        "include_tests": None,
        "no_cache": False,
        "jobs": None,
        "quiet": False,
        "verbose": False,
        "output_format": None,
        "select": None,
        "ignore": None,
        "strict": None,
        "baseline_file": None,
        "write_baseline": None,
    }
    args = list(args)
    while args:
        arg = args.pop(0)
        name, given, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in _FLAGS and not given:
            params[_FLAGS[name]] = True
        elif name in _VALUES:
            if not given:
                if not args:
                    return None
                value = args.pop(0)
            dest = _VALUES[name]
            if not value or value.startswith("-") or not _usable(dest, value):
                return None
            if dest == "exclude":
                params[dest].append(value)
            else:
                params[dest] = int(value) if dest == "jobs" else Path(value) if dest in _FILES else value
        elif arg.startswith("-") or not _readable(arg):
            return None
        else:
            params["paths"].append(Path(arg))
    params["paths"], params["exclude"] = tuple(params["paths"]), tuple(params["exclude"])
    return params


def _usable(dest: str, value: str) -> bool:
    if dest == "jobs":
        return value.isascii() and value.isdigit()
    if dest == "output_format":
        return value in FORMATS
    if dest in _FILES:  # click.Path(dir_okay=False): if it exists, a readable file
        return not os.path.exists(value) or (not os.path.isdir(value) and os.access(value, os.R_OK))
    return True


def _readable(path: str) -> bool:
    """As click.Path(exists=True) takes a path."""
    return os.path.exists(path) and os.access(path, os.R_OK)


def _plain_streams() -> bool:
    """Output streams click would write to as they are (it re-encodes ASCII ones as UTF-8)."""
    return all(
        stream is not None and codecs.lookup(stream.encoding or "ascii").name != "ascii"
        for stream in (sys.stdout, sys.stderr)
    )


def _scan_without_click(params: dict[str, object]) -> None:
    """Runs `scan` and exits; returns only on a usage error, for click to report."""
    from . import commands

    common, options = commands.Common.split(params)
    try:
        commands.finish(lambda: commands.guarded(lambda: commands.scan(common, **options)))
    except commands.UsageError:
        return  # click reads the command line again, and reports the error with the usage


def main() -> None:
    args = sys.argv[1:]
    if args[:1] and args[0] in _LISTING_COMMANDS:
        start_listing(project_root(os.getcwd()))
    params = scan_parameters(args[1:]) if args[:1] == ["scan"] and os.name == "posix" else None
    if params is not None and _plain_streams():
        _scan_without_click(params)
    from .cli import entry

    entry()


if __name__ == "__main__":
    main()
