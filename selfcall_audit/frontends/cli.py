"""The command line: click's declarations, and `main(argv) -> int`, its one way in (the console
script, `python -m selfcall_audit` and the tests all go through it). What the analysing commands do
is in `commands` (`fixing` for fix). Exit codes: 0 clean, 1 findings, 2 usage or internal error, 130 interrupted."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..report import FORMATS
from ..rules import RULES
from ..workspace.listing import GitListing
from . import commands
from .commands import (
    COLOR_CHOICES,
    EXIT_ERROR,
    Common,
    run_analysis,
    terminal_width,
)
from .ending import finish

_EPILOG = """\b
Examples:
  selfcall-audit scan                       scan the project around the current folder
  selfcall-audit scan responses_api_agents  report only on that folder (the whole project is indexed)
  selfcall-audit scan --format json -o audit.json
  selfcall-audit scan --select SCA --strict  every rule, including possible self-calls (SCA003)
  selfcall-audit fix --diff                 show the migration to the in-process helper
  selfcall-audit explain SCA001
"""


_STARTED = "selfcall_audit.started"  # the context's record of when the process started


class UsageError(click.UsageError):
    exit_code = EXIT_ERROR


def _verbose(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["selfcall_audit.verbose"] = value  # read when an internal error is reported
    return value


def _common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        # Not exists=True: a broken link or an unreadable file named here is an SCA900 entry.
        click.argument("paths", nargs=-1, type=click.Path(readable=False, path_type=Path)),
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Read settings from this TOML file instead of the root's pyproject.toml.",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="GLOB",
            help="Leave out matching files or folders (repeatable; replaces the settings' `exclude`).",
        ),
        click.option(
            "--extend-exclude",
            multiple=True,
            metavar="GLOB",
            help="Leave out matching files or folders too, on top of the settings (repeatable).",
        ),
        click.option(
            "--include-tests",
            is_flag=True,
            default=None,
            help="Also analyse test code (tests/, test_*.py, *_test.py, conftest.py).",
        ),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the facts cache."),
        click.option(
            "--jobs",
            type=click.IntRange(min=0),
            metavar="N",
            help="Parse (and `fix` rewrites) in N processes (0: one per core).",
        ),
        click.option(
            "--color",
            type=click.Choice(COLOR_CHOICES),
            default="auto",
            show_default=True,
            help="Colour the output; `auto` colours a terminal unless NO_COLOR is set (FORCE_COLOR forces it).",
        ),
        click.option(
            "-q", "--quiet", is_flag=True, help="Only the results: no progress bar, summary or notes."
        ),
        click.option(
            "-v",
            "--verbose",
            is_flag=True,
            callback=_verbose,
            help="Print timings, and the traceback of an internal error.",
        ),
    ]

    @functools.wraps(func)
    def with_common(**kwargs: Any) -> Any:
        # `main` hands git's listing, started before this module loaded, to the context
        ctx = click.get_current_context()
        common, options = Common.split(kwargs, ctx.find_object(GitListing), ctx.meta.get(_STARTED))
        try:
            return func(common, **options)
        except commands.SettingsError as exc:  # not a mistake of the command line: no usage banner
            click.echo(f"selfcall-audit: error: {exc}", err=True)
            _exit(EXIT_ERROR)
        except commands.UsageError as exc:
            raise UsageError(str(exc)) from None

    for option in reversed(options):
        with_common = option(with_common)
    return with_common


def _exit(code: int) -> None:
    """End the command with this exit code, in click's runner as in `main`."""
    click.get_current_context().exit(code)


@click.group(epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="selfcall-audit")
def group() -> None:
    """Find agent servers that call their own /v1/responses over HTTP, and migrate them in-process."""


@group.command(short_help="Report agent self-calls in the project, or in PATHS.")
@_common_options
@click.option(
    "--format",
    "--output-format",
    "output_format",
    type=click.Choice(FORMATS),
    help="Output format (default: text on a terminal, concise otherwise).",
)
@click.option(
    "-o",
    "--output-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the results to FILE instead of stdout.",
)
@click.option(
    "--select", metavar="CODES", help="Report only these codes or prefixes (replaces the defaults)."
)
@click.option(
    "--extend-select", metavar="CODES", help="Report these codes or prefixes too, on top of the selection."
)
@click.option("--ignore", metavar="CODES", help="Do not report these codes or prefixes.")
@click.option(
    "--strict",
    is_flag=True,
    default=None,
    help="Also report possible self-calls (SCA003); unreadable files (SCA900) fail the run.",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (errors still exit 2).")
@click.option(
    "--statistics",
    is_flag=True,
    help="Print the number of findings per code instead of the findings (a list with --format json).",
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Report only findings not recorded in FILE (written by --write-baseline).",
)
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Record the current findings in FILE as the baseline, and exit 0.",
)
@click.option(
    "--diff-base",
    metavar="REF",
    help="Report only findings that are new against the git commit REF (e.g. origin/main).",
)
def scan(common: Common, **options: Any) -> None:
    """Report agent self-calls (SCA001, SCA002; SCA003 on request) in PATHS (default: the project).

    The whole project root (the nearest folder with pyproject.toml or .git) is indexed even when
    PATHS name only some files, so pre-commit can pass just the changed ones. A folder whose
    pyproject.toml has [tool.selfcall-audit] is a project of its own, analysed with its own
    settings wherever the scan starts (a monorepo). Paths are printed
    relative to the current folder (text, concise, junit), to the repository's top level (sarif,
    github, gitlab) or to the project root (json, whose `root` key names it).

    Exit status: 0 no findings, 1 findings (or, with --strict, unreadable files), 2 usage or
    internal error.
    """
    _exit(commands.scan(common, commands.ScanOptions(**options)))


@group.command(short_help="List the agent classes, their YAML instances and self-calls.")
@_common_options
@click.option(
    "--format",
    "--output-format",
    "output_format",
    type=click.Choice(["text", "concise", "json"]),
    help="Output format (default: a table on a terminal, concise otherwise).",
)
def agents(common: Common, output_format: str | None) -> None:
    """List the agent classes in PATHS (default: the project): file, bases, YAML instance names, and
    the self-calls in each class (counted over the whole project, whatever PATHS)."""
    from ..report import inventory

    root, _, projects = common.prepare(whole=True)
    output = commands.Output.choose(None, common.color)
    progress = common.progress()
    try:
        report = run_analysis(common, projects, root, progress, inventory=True)
    finally:
        progress.close()
    scopes = tuple(
        "" if rel == "." else rel.replace(os.sep, "/")
        for rel in (os.path.relpath(os.path.realpath(p), root) for p in common.paths)
    )
    rows = inventory.rows(report, scopes)
    output_format = output_format or ("text" if output.terminal else "concise")
    if output_format == "json":
        out = inventory.render_json(rows, root)
    elif output_format == "concise":
        out = inventory.render_concise(rows, root)
    else:
        out = inventory.render_table(rows, root, terminal_width() if output.terminal else None, output.color)
    output.write(out)


@group.command(short_help="Replace self-calls to /v1/responses with in-process calls.")
@_common_options
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff of the changes; write nothing.")
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 if any file would change or a self-call is left."
)
@click.option(
    "--helper",
    "helper_spec",
    metavar="MODULE:NAME",
    help="The helper to call (default: the `helper` setting, else the copy fix writes to "
    "nemo_gym/inprocess.py); a project module that does not exist yet is written first.",
)
@click.option("--select", metavar="CODES", help="Fix and report only these codes or prefixes.")
@click.option("--ignore", metavar="CODES", help="Neither fix nor report these codes or prefixes.")
def fix(
    common: Common,
    show_diff: bool,
    check: bool,
    helper_spec: str | None,
    select: str | None,
    ignore: str | None,
) -> None:
    """Rewrite self-calls to /v1/responses (SCA001) in PATHS to the in-process helper.

    Only the call expression changes, and the helper's import is added once; calls that cannot be
    rewritten safely are listed with the reason. A file is written atomically, and only if it has
    not changed since it was analysed.

    Exit status: 0 no self-call remains, 1 some remain (with --diff or --check: also when a file
    would change), 2 usage or internal error.
    """
    from .fixing import finish_project, plan_project

    base, _, projects = common.prepare(
        select=commands.codes(select, "--select"), ignore=commands.codes(ignore, "--ignore")
    )
    progress = common.progress()  # one display for the run, every project's phases on it
    try:
        planned = [  # each project with its own settings and helper (a monorepo's nested projects)
            plan_project(root, settings, paths, projects, helper_spec, progress, common.early)
            for root, settings, paths in projects
        ]
        named = len(planned) > 1  # one summary per project: each says which
        status = max(
            finish_project(common, base, fixing, show_diff, check, progress, named) for fixing in planned
        )
    finally:
        progress.close()
    if status:
        _exit(status)


@group.command(short_help="Vendor the in-process helper into your repository.")
@click.option(
    "--write",
    "target",
    required=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to put it, inside the project: a .py file, or an existing folder (then PATH/inprocess.py).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file that differs.")
def helper(target: Path, force: bool) -> None:
    """Vendor the in-process helper into your repository, so that it needs no selfcall-audit at run time.

    Then run `fix` with the --helper value printed (or set it as `helper` in [tool.selfcall-audit]).
    """
    from .vendoring import vendor

    try:
        _exit(vendor(target, force))
    except commands.UsageError as exc:
        raise UsageError(str(exc)) from None


@group.command(short_help="Run the language server (LSP over stdio) for editors.")
def server() -> None:
    """Run the language server over stdin and stdout: diagnostics as you type, the rewrite as a
    quick fix. Needs the `lsp` extra (from a checkout: pip install -e '.[lsp]'); see docs/editors.md."""
    try:
        from .lsp import serve  # pygls is an optional dependency
    except ImportError as exc:
        raise UsageError(f"the language server needs the `lsp` extra (pygls): {exc}") from None
    serve()


@group.command(short_help="Explain a rule, or every rule with --all.")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Explain every rule.")
def explain(code: str | None, show_all: bool) -> None:
    """Explain a rule (CODE, e.g. SCA001): what it finds, why it matters, an example before and after."""
    from ..report.docs import explanation

    if show_all == (code is not None):
        raise UsageError("give one rule CODE, or --all")
    if show_all:
        click.echo("\n\n".join(explanation(rule) for rule in RULES.values()))
        return
    rule = RULES.get(code.upper())
    if rule is None:
        raise UsageError(f"unknown rule {code!r}; rules: {', '.join(RULES)}")
    click.echo(explanation(rule))


def usage_error(argv: list[str], message: str) -> int:
    """`message` said as click says a usage error of the command line `argv` (its command's usage
    first), for a run that read its command line without click (`quick`)."""
    name, *args = argv
    with group.make_context("selfcall-audit", [], resilient_parsing=True) as ctx:
        command = group.get_command(ctx, name)
        assert command is not None, name  # `quick` reads only the command lines of a command
        with command.make_context(name, args, parent=ctx, resilient_parsing=True) as sub:
            UsageError(message, sub).show()
    return EXIT_ERROR


def main(argv: list[str] | None = None, early: GitListing | None = None, started: float | None = None) -> int:
    """Run the command line `argv` (default: the process's) and return its exit code. `early`:
    git's listing of the current folder's project, started before this module loaded; `started`:
    when the process started (`time.perf_counter()`), which the summary's time counts from."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = False
    started = time.perf_counter() if started is None else started

    def run() -> int:
        nonlocal verbose
        try:
            with group.make_context("selfcall-audit", args, obj=early) as ctx:
                ctx.meta[_STARTED] = started
                try:
                    group.invoke(ctx)
                finally:
                    verbose = bool(ctx.meta.get("selfcall_audit.verbose"))
            return 0
        except click.exceptions.Exit as exc:
            return exc.exit_code
        except click.NoSuchOption as exc:
            if exc.option_name == "--fix":  # ruff's spelling; click would suggest --config
                exc = UsageError(
                    "no such option: --fix; to rewrite self-calls, run `selfcall-audit fix`", exc.ctx
                )
            exc.show()
            return EXIT_ERROR
        except click.ClickException as exc:
            exc.show()
            return EXIT_ERROR
        except click.Abort:
            raise KeyboardInterrupt from None

    return finish(run, lambda: verbose)
