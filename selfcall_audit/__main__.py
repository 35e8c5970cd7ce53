"""`python -m selfcall_audit`: the command line, as the console script runs it."""

from __future__ import annotations

from .frontends.cli import run

if __name__ == "__main__":
    run()
