"""The console script. It starts git's listing of the project before it loads the command line:
loading click and the analysis takes a warm run about half its time, and git lists the files
meanwhile. The guess (the project around the current folder, for the commands that read it)
only saves time: a run for another root lists that one itself."""

from __future__ import annotations

import os
import sys

from .listing import project_root, start_listing

_LISTING_COMMANDS = ("scan", "fix", "agents")


def main() -> None:
    if sys.argv[1:2] and sys.argv[1] in _LISTING_COMMANDS:
        start_listing(project_root(os.getcwd()))
    from .cli import entry

    entry()
