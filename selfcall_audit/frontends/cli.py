"""The command line, declared with click; what the analysing commands do is in `commands`. Exit
codes per DESIGN §5 (0 clean, 1 findings, 2 error)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..report import FORMATS
from ..rules import FINDING_CODES, RULES
from . import commands
from .commands import EXIT_ERROR, EXIT_FINDINGS, Common, LazyProgress, run_analysis, terminal_width

_EPILOG = """\b
Examples:
  selfcall-audit scan                       scan the project around the current folder
  selfcall-audit scan responses_api_agents  report only on that folder (the whole project is indexed)
  selfcall-audit scan --format json > audit.json
  selfcall-audit scan --select SCA --strict  every rule, including possible self-calls (SCA003)
  selfcall-audit fix --diff                 show the migration to the in-process helper
  selfcall-audit explain SCA001
"""


class UsageError(click.UsageError):
    exit_code = EXIT_ERROR


def _common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path)),
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
            help="Leave out matching files or folders (repeatable; adds to the settings).",
        ),
        click.option(
            "--include-tests",
            is_flag=True,
            default=None,
            help="Also analyse test code (tests/, test_*.py, *_test.py, conftest.py).",
        ),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the facts cache."),
        click.option(
            "--jobs", type=click.IntRange(min=0), metavar="N", help="Parse in N processes (0: one per core)."
        ),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only: no summary, no progress."),
        click.option(
            "-v", "--verbose", is_flag=True, help="Print timings and tracebacks of internal errors."
        ),
    ]

    @functools.wraps(func)
    def with_common(**kwargs: Any) -> Any:
        common, options = Common.split(kwargs)
        try:
            return func(common, **options)
        except commands.UsageError as exc:
            raise UsageError(str(exc)) from None

    for option in reversed(options):
        with_common = option(with_common)
    return with_common


class _Group(click.Group):
    """Turns unexpected exceptions into one clear line and exit code 2 (traceback with -v)."""

    def invoke(self, ctx: click.Context) -> Any:
        return commands.guarded(
            functools.partial(super().invoke, ctx),
            passing=(click.ClickException, click.exceptions.Exit, click.Abort),
        )


@click.group(cls=_Group, epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="selfcall-audit")
def main() -> None:
    """Find agent servers that call their own /v1/responses over HTTP, and migrate them in-process."""


@main.command(epilog=_EPILOG)
@_common_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    help="Output format (default: text on a terminal, concise otherwise).",
)
@click.option(
    "--select", metavar="CODES", help="Report only these codes or prefixes (replaces the defaults)."
)
@click.option("--ignore", metavar="CODES", help="Do not report these codes or prefixes.")
@click.option(
    "--strict",
    is_flag=True,
    default=None,
    help="Also report possible self-calls (SCA003); unreadable files (SCA900) fail the run.",
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
def scan(common: Common, **options: Any) -> None:
    """Report agent self-calls (SCA001, SCA002; SCA003 on request) in PATHS (default: the project).

    The whole project root (the nearest folder with pyproject.toml or .git) is indexed even when
    PATHS name only some files, so pre-commit can pass just the changed ones.

    Exit status: 0 no findings, 1 findings (or, with --strict, unreadable files), 2 usage or
    internal error.
    """
    commands.scan(common, **options)


@main.command(epilog=_EPILOG)
@_common_options
@click.option(
    "--format", "output_format", type=click.Choice(["text", "json"]), default="text", help="Output format."
)
def agents(
    common: Common,
    output_format: str,
) -> None:
    """List every agent class: its file, bases, YAML instance names and self-calls."""
    root, settings = common.prepare()
    show_progress = not common.quiet and sys.stderr.isatty()
    report = run_analysis(common.paths, settings, root, show_progress, inventory=True)
    counts: dict[tuple[str, str], int] = {}
    for finding in report.findings:
        counts[(finding.path, finding.agent)] = counts.get((finding.path, finding.agent), 0) + 1
    rows = [
        {
            "agent": a.name,
            "path": a.path,
            "line": a.line,
            "bases": list(a.bases),
            "instances": list(a.instances),
            "self_calls": counts.get((a.path, a.name), 0),
        }
        for a in report.agents
    ]
    if output_format == "json":
        click.echo(json.dumps({"version": 1, "root": str(root), "agents": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} agent classes", title_justify="left")
    for column in ("agent", "file", "bases", "instances", "self-calls"):
        table.add_column(column, justify="right" if column == "self-calls" else "left")
    for row in rows:
        table.add_row(
            row["agent"],
            f"{row['path']}:{row['line']}",
            ", ".join(b.rsplit(".", 1)[-1] for b in row["bases"]),
            ", ".join(row["instances"]) or "-",
            str(row["self_calls"]),
        )
    Console(width=terminal_width() or 160).print(table)


@main.command(epilog=_EPILOG)
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
def fix(
    common: Common,
    show_diff: bool,
    check: bool,
    helper_spec: str | None,
) -> None:
    """Rewrite self-calls to /v1/responses (SCA001) in PATHS to the in-process helper.

    Only the call expression changes, and the helper's import is added once; calls that cannot be
    rewritten safely are listed with the reason. A file is written atomically, and only if it has
    not changed since it was analysed.

    Exit status: 0 no self-call remains, 1 some remain (with --diff or --check: also when a file
    would change), 2 usage or internal error.
    """
    from ..migrate.codemod import DEFAULT_HELPER, Helper, plan_fix
    from ..migrate.vendor import Placement, VendorError, place_beside, place_helper, vendor_helper

    root, settings = common.prepare()
    spec = helper_spec or settings.helper
    try:
        if spec:
            Helper.parse(spec)
        placement = place_helper(root, spec)
    except (ValueError, VendorError) as exc:
        where = "--helper" if helper_spec else "the `helper` setting"
        raise UsageError(f"{where}: {exc}" if spec else str(exc)) from None
    unplaced = placement is None  # no nemo_gym package: beside the files to rewrite, once known
    placement = placement or Placement(DEFAULT_HELPER)
    helper = Helper.parse(placement.spec)
    dry_run = show_diff or check
    progress = LazyProgress(not common.quiet and sys.stderr.isatty())
    try:
        plan = plan_fix(root, settings, common.paths or (root,), helper, progress)
    finally:
        progress.close()
    if unplaced and plan.rewritten:
        try:
            placement = place_beside(root, sorted({file.path for file, _ in plan.rewritten}))
        except VendorError as exc:
            click.echo(f"selfcall-audit: {exc}; nothing was written", err=True)
            sys.exit(EXIT_ERROR)
        helper = Helper.parse(placement.spec)
        plan = plan_fix(root, settings, common.paths or (root,), helper)
    vendored = placement.write_to if plan.rewritten else None
    if vendored and not dry_run:
        try:
            vendor_helper(root / vendored)
        except (VendorError, OSError) as exc:
            message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            click.echo(f"selfcall-audit: cannot write the helper: {message}; nothing was written", err=True)
            sys.exit(EXIT_ERROR)
    if not dry_run:
        plan.write()

    def say(line: str) -> None:  # with --diff, stdout carries the diff alone
        click.echo(line, err=show_diff)

    if vendored and not common.quiet:
        say(
            f"{vendored}: {'would write' if dry_run else 'wrote'} the in-process helper the rewritten calls import"
        )
    if show_diff:
        click.echo("".join(f.diff() for f in plan.files if f.changed), nl=False)
    rewritten = plan.rewritten
    if not common.quiet:
        verb = "would rewrite" if dry_run else "rewrote"
        for _, outcome in rewritten:
            say(f"{outcome.finding.path}:{outcome.finding.line}: {verb} self-call to {helper.name}")
        for file in plan.files:
            for line, name in file.removed_aliases if file.changed and file.write_error is None else ():
                say(
                    f"{file.path}:{line}: {'would remove' if dry_run else 'removed'} `{name} = ...`, "
                    "unused after the rewrite"
                )
    not_fixed = plan.not_fixed
    for finding, reason in not_fixed:
        say(f"{finding.path}:{finding.line}:{finding.column}: {finding.code} not rewritten: {reason}")
    for error in plan.report.errors:
        say(f"{error.path}:1:1: {error.code} {error.message}")
    for error in plan.errors:
        click.echo(f"selfcall-audit: {error}", err=True)
    if not common.quiet:
        done = "Nothing to rewrite"
        if rewritten:
            files = _plural(len({file.path for file, _ in rewritten}), "file")
            calls = _plural(len(rewritten), "self-call")
            done = f"{'Would rewrite' if dry_run else 'Rewrote'} {calls} in {files}"
        left = (
            f"{_plural(len(not_fixed), 'self-call')} to fix by hand"
            if not_fixed
            else "none left to fix by hand"
        )
        say(f"{done}; {left}.")
    if rewritten and not common.quiet:
        _name_impacted_tests(root, settings, rewritten, say)
    if common.verbose:
        click.echo(f"{plan.report.files_parsed} files parsed in {plan.report.seconds:.3f}s", err=True)
    if plan.errors:
        sys.exit(EXIT_ERROR)
    if not_fixed or (dry_run and rewritten):
        sys.exit(EXIT_FINDINGS)


def _name_impacted_tests(root: Path, settings: Any, rewritten: list, say: Callable[[str], None]) -> None:
    from ..migrate.test_impact import Rewritten, impacted_tests

    methods = [Rewritten(o.finding.path, o.finding.method) for _, o in rewritten]
    tests = impacted_tests(root, methods, settings.route, settings.exclude)
    if tests:
        say(f"{_plural(len(tests), 'test')} modelled the HTTP self-call; update them:")
    for test in tests:
        say(f"  {test.node_id}: {test.reason}")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@main.command()
@click.option(
    "--write",
    "target",
    required=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to put it: a .py file, or a folder (then PATH/inprocess.py).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file that differs.")
def helper(target: Path, force: bool) -> None:
    """Vendor the in-process helper into your repository, so that it needs no selfcall-audit at run time.

    Then run `fix` with the --helper value printed (or set it as `helper` in [tool.selfcall-audit]).
    """
    from ..migrate.vendor import VendorError, helper_spec_for, vendor_helper

    try:
        path, written = vendor_helper(target, force)
    except (VendorError, OSError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        click.echo(f"selfcall-audit: cannot write the helper: {message}", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(f"{'Wrote' if written else 'Already up to date:'} {path}")
    spec = helper_spec_for(path)
    if spec is None:
        click.echo(f"Then: selfcall-audit fix --helper MODULE:responses_in_process, MODULE importing {path}")
    else:
        click.echo(f"Then: selfcall-audit fix --helper {spec}")
        click.echo(f'  or set helper = "{spec}" under [tool.selfcall-audit] in pyproject.toml')


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a rule: what it finds, why it matters, and an example before and after."""
    rule = RULES.get(code.upper())
    if rule is None:
        raise UsageError(f"unknown rule {code!r}; rules: {', '.join(RULES)}")
    default = "on" if rule.default_on else "off (enable with --select or --strict)"
    if rule.code not in FINDING_CODES:
        default = "always reported, as an error entry"
    lines = [
        f"{rule.code} ({rule.name})",
        "",
        rule.summary,
        "",
        rule.explanation,
        "",
        f"Default: {default}. Fixable: {'yes, with `selfcall-audit fix`' if rule.fixable else 'no'}.",
        "",
        "Example:",
        *(f"    {line}" for line in rule.bad.splitlines()),
        "",
        "Instead:",
        *(f"    {line}" for line in rule.good.splitlines()),
    ]
    click.echo("\n".join(lines))


def entry() -> None:
    """The console script's command line (see `commands.finish`), named as installed also when
    run as a module."""
    commands.finish(functools.partial(main, prog_name="selfcall-audit"))


if __name__ == "__main__":  # pragma: no cover
    entry()
