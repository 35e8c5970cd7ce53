"""What `fix` does in one project once `cli` has read the command line: plan the rewrites, vendor
the helper, write, and say what changed and which tests modelled the HTTP self-call."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..report.escape import neutralise
from . import commands
from .commands import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, Common

if TYPE_CHECKING:
    from ..api import Projects
    from ..config import Settings
    from ..migrate.codemod import FixPlan, Helper


def _end_run(code: int) -> None:
    """End the command, whatever project is next, with this exit code."""
    click.get_current_context().exit(code)


@dataclass(frozen=True)
class ProjectFix:
    """One project's planned rewrites, with the helper they call and where its copy goes."""

    root: Path
    settings: Settings
    plan: FixPlan
    helper: Helper
    vendored: str | None  # the helper's copy to write, root-relative, when calls are rewritten


def plan_project(
    common: Common,
    root: Path,
    settings: Settings,
    paths: tuple[Path, ...],
    projects: Projects,
    helper_spec: str | None,
) -> ProjectFix:
    """`fix`'s plan for one project of the run's `projects` (the nested ones it finds are added
    to them). Every project is planned, and its helper placed, before any file is written: a
    helper that cannot go where asked stops the run with nothing written."""
    from ..api import plan_fix
    from ..migrate.codemod import DEFAULT_HELPER, Helper
    from ..migrate.vendor import Placement, VendorError, place_beside, place_helper

    spec = helper_spec or settings.helper
    try:
        if spec:
            Helper.parse(spec)
        placement = place_helper(root, spec)
    except (ValueError, VendorError) as exc:
        where = "--helper" if helper_spec else "the `helper` setting"
        raise commands.UsageError(f"{where}: {exc}" if spec else str(exc)) from None
    unplaced = placement is None  # no nemo_gym package: beside the files to rewrite, once known
    placement = placement or Placement(DEFAULT_HELPER)
    helper = Helper.parse(placement.spec)
    progress = common.progress()
    try:
        plan = plan_fix(root, settings, paths, helper, progress)
        projects.found(plan.report)
        if unplaced and plan.rewritten:
            try:
                placement = place_beside(root, sorted({file.path for file, _ in plan.rewritten}))
            except VendorError as exc:
                click.echo(f"selfcall-audit: {exc}; nothing was written", err=True)
                _end_run(EXIT_ERROR)
            helper = Helper.parse(placement.spec)
            plan = plan_fix(root, settings, paths, helper, progress)
    finally:
        progress.close()
    return ProjectFix(root, settings, plan, helper, placement.write_to if plan.rewritten else None)


def finish_project(
    common: Common,
    base: Path,
    fixing: ProjectFix,
    show_diff: bool,
    check: bool,
    since: float,
    named: bool = False,
) -> int:
    """Write one planned project (unless `show_diff` or `check`) and say what changed: its exit
    status; an unwritable helper or an interrupt ends the whole run at once. `base` is the run's
    outermost root, from which `--diff` names every project's files; `since`, when the run began
    (the bar shows the rewriting at once if the run is already long); `named`: the summary says
    which project it is about (a run over several, whose summaries would otherwise contradict)."""
    from ..migrate.vendor import VendorError, check_place, vendor_helper
    from ..workspace.lock import project_lock
    from ..workspace.signals import deferred_signals

    root, plan, vendored = fixing.root, fixing.plan, fixing.vendored
    dry_run = show_diff or check

    def shown(path: str) -> str:
        return os.path.relpath(root / path).replace(os.sep, "/")

    with project_lock(root) if not dry_run else contextlib.nullcontext():  # one writing `fix` at a time
        created = False  # the copy is this run's: no file of the project held it before
        if vendored and not dry_run:
            with deferred_signals() as received:  # a signal stops the run once the helper is whole
                try:
                    check_place(root, vendored)
                    created = not os.path.lexists(root / vendored)
                    vendor_helper(root / vendored)
                except (VendorError, OSError) as exc:
                    message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                    click.echo(
                        f"selfcall-audit: cannot write the helper: {message}; no file of this project was rewritten",
                        err=True,
                    )
                    _end_run(EXIT_ERROR)
            if received:
                click.echo(
                    f"selfcall-audit: interrupted; wrote {neutralise(shown(vendored))}, rewrote no file before stopping",
                    err=True,
                )
                _end_run(128 + received[0])
        if not dry_run:
            progress = common.progress(since=since)
            try:
                progress.stage("rewriting")
                progress("", 0, sum(file.changed for file in plan.files))
                plan.write()
            finally:
                progress.close()
            if created and not plan.rewritten and plan.interrupted is None:
                # every rewrite was refused as it was written (a file edited meanwhile, hard links):
                # nothing imports the copy, so it goes, as the run found the project
                with contextlib.suppress(OSError):
                    os.unlink(root / vendored)
                    vendored = None

    def say(line: str) -> None:  # with --diff, stdout carries the diff alone
        click.echo(neutralise(line), err=show_diff)

    if vendored and not common.quiet:
        say(
            f"{shown(vendored)}: {'would write' if dry_run else 'wrote'} the in-process helper the rewritten calls import"
        )
    if show_diff:
        # named from the outermost project's root, so that one patch applies to every project's files
        prefix = os.path.relpath(root, base).replace(os.sep, "/")
        changed = [
            f if prefix == "." else replace(f, path=f"{prefix}/{f.path}") for f in plan.files if f.changed
        ]
        click.echo(b"".join(f.diff() for f in changed), nl=False)
    rewritten = plan.rewritten
    if not common.quiet:
        verb = "would rewrite" if dry_run else "rewrote"
        for _, outcome in rewritten:
            say(
                f"{shown(outcome.finding.path)}:{outcome.finding.line}: {verb} self-call to {fixing.helper.name}"
            )
        for file in plan.files:
            for line, name in file.removed_aliases if file.changed and file.write_error is None else ():
                say(
                    f"{shown(file.path)}:{line}: {'would remove' if dry_run else 'removed'} `{name} = ...`, "
                    "unused after the rewrite"
                )
    not_fixed = plan.not_fixed
    for finding, reason in not_fixed:
        say(f"{shown(finding.path)}:{finding.line}:{finding.column}: {finding.code} not rewritten: {reason}")
    for error in plan.report.errors:
        say(f"{shown(error.path)}:{error.position[0]}:{error.position[1]}: {error.code} {error.message}")
    for error in plan.errors:
        click.echo(f"selfcall-audit: {neutralise(error)}", err=True)
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
        project = f"{shown('.')}/: " if named else ""
        say(f"{project}{done}; {left}.")
    if rewritten and not common.quiet:
        _name_impacted_tests(root, fixing.settings, rewritten, say, shown)
    if common.verbose:
        click.echo(f"{plan.report.files_parsed} files parsed in {plan.report.seconds:.3f}s", err=True)
    if plan.interrupted is not None:
        written = sorted({neutralise(shown(file.path)) for file, _ in rewritten})
        click.echo(
            f"selfcall-audit: interrupted; rewrote {_plural(len(written), 'file')} before stopping"
            + "".join(f"\n  {path}" for path in written),
            err=True,
        )
        _end_run(128 + plan.interrupted)
    if plan.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if not_fixed or (dry_run and rewritten) else EXIT_CLEAN


def _name_impacted_tests(
    root: Path, settings: Any, rewritten: list, say: Callable[[str], None], shown: Callable[[str], str]
) -> None:
    from ..migrate.test_impact import Rewritten, impacted_tests

    methods = [Rewritten(o.finding.path, o.finding.method) for _, o in rewritten]
    tests = impacted_tests(root, methods, settings.route, settings.exclude)
    if tests:
        say(f"{_plural(len(tests), 'test')} modelled the HTTP self-call; update them:")
    for test in tests:  # node ids from the current folder, as the other paths: pytest takes them so
        path, _, name = test.node_id.partition("::")
        say(f"  {shown(path)}::{name}: {test.reason}")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
