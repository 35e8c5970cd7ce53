"""What the `helper` command does once `cli` has read the command line: write the helper into the
project, and say how `fix` is to call it."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..migrate.vendor import VendorError, helper_spec_for, vendor_helper
from ..workspace.discovery import find_root
from .commands import EXIT_CLEAN, EXIT_ERROR, UsageError


def vendor(target: Path, force: bool) -> int:
    """Write the helper at `target` (a .py file, or a folder for `inprocess.py`), which must be
    inside the project root; the exit code."""
    folder = target if target.is_dir() or not target.suffix else target.parent
    if not folder.is_dir():
        raise UsageError(
            f"--write: the folder {click.format_filename(folder)!r} does not exist; create it first"
        )
    root = find_root(Path.cwd())
    real = Path(os.path.realpath(folder))
    if real != root and root not in real.parents:
        raise UsageError(f"--write: {click.format_filename(target)!r} is outside the project root {root}")
    try:
        path, written = vendor_helper(target, force)
    except (VendorError, OSError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        click.echo(f"selfcall-audit: cannot write the helper: {message}", err=True)
        return EXIT_ERROR
    click.echo(f"{'Wrote' if written else 'Already up to date:'} {path}")
    spec = helper_spec_for(path)
    if spec is None:
        click.echo(
            f"{path} cannot be imported by a dotted module name (a folder or file name in it is not an identifier); "
            "move it into a package of the project, then: selfcall-audit fix --helper PACKAGE.MODULE:responses_in_process"
        )
    else:
        click.echo(f"Then: selfcall-audit fix --helper {spec}")
        click.echo(f'  or set helper = "{spec}" under [tool.selfcall-audit] in pyproject.toml')
    return EXIT_CLEAN
