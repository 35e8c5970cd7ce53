"""`python -m selfcall_audit.frontends.launch`, and `launch.main()`: the command line as the console
script runs it (the older entry point's name, kept for scripts that call it)."""

from __future__ import annotations

from .cli import run as main

if __name__ == "__main__":
    main()
