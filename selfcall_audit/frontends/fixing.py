"""What `fix` does in one project once `cli` has read the command line: plan the rewrites, vendor
the helper, write, update the tests that modelled the HTTP self-call, and say what changed."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..api import plan_fix
from ..migrate.codemod import DEFAULT_HELPER, FixPlan, Helper, file_diff, new_file_diff
from ..migrate.house_style import is_first_party, line_length
from ..migrate.test_impact import ImpactedTest, Rewritten, module_name
from ..migrate.vendor import (
    Placement,
    VendorError,
    check_place,
    helper_source,
    place_beside,
    place_helper,
    vendor_helper,
)
from ..report.escape import neutralise
from ..report.messages import modelled
from ..report.summary import plural
from ..workspace.lock import project_lock
from ..workspace.signals import deferred_signals
from ..workspace.write import write_all
from . import commands
from .commands import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, Common
from .ending import Stopped

if TYPE_CHECKING:
    from ..api import Projects
    from ..config import Settings
    from ..migrate.record_app import Recording
    from ..migrate.test_update import TestUpdate
    from ..workspace.listing import GitListing
    from .display import Display


@dataclass(frozen=True)
class ProjectFix:
    """One project's planned rewrites, with the helper they call and where its copy goes."""

    root: Path
    settings: Settings
    plan: FixPlan
    helper: Helper
    vendored: str | None  # the helper's copy to write, root-relative, when calls are rewritten


def plan_project(
    root: Path,
    settings: Settings,
    paths: tuple[Path, ...],
    projects: Projects,
    helper_spec: str | None,
    progress: Display,
    early: GitListing | None = None,
) -> ProjectFix:
    """`fix`'s plan for one project of the run's `projects` (the nested ones it finds are added
    to them). Every project is planned, and its helper placed, before any file is written: a
    helper that cannot go where asked stops the run with nothing written. `early`: git's listing
    of the current folder's project, started before (another project's lists its own)."""
    spec = helper_spec or settings.helper
    try:
        if spec:
            Helper.parse(spec)
        placement = place_helper(root, spec)
    except (ValueError, VendorError) as exc:
        where = "--helper" if helper_spec else "the `helper` setting"
        error = commands.UsageError if helper_spec else commands.SettingsError
        raise error(f"{where}: {exc}" if spec else str(exc)) from None
    unplaced = placement is None  # no nemo_gym package: beside the files to rewrite, once known
    placement = placement or Placement(DEFAULT_HELPER)
    helper = Helper.parse(placement.spec)
    plan = plan_fix(root, settings, paths, helper, progress, early)
    projects.found(plan.report)
    if unplaced and plan.rewritten:
        try:
            placement = place_beside(root, sorted({file.path for file, _ in plan.rewritten}))
        except VendorError as exc:
            progress.close()
            raise Stopped(f"selfcall-audit: {exc}; nothing was written", EXIT_ERROR) from None
        helper = Helper.parse(placement.spec)
        plan = plan_fix(root, settings, paths, helper, progress, early)
    return ProjectFix(root, settings, plan, helper, placement.write_to if plan.rewritten else None)


def finish_project(
    common: Common,
    base: Path,
    fixing: ProjectFix,
    show_diff: bool,
    check: bool,
    progress: Display,
    named: bool = False,
) -> int:
    """Write one planned project (unless `show_diff` or `check`) and say what changed: its exit
    status; an unwritable helper or an interrupt ends the whole run at once (`Stopped`). `base`
    is the run's outermost root, from which `--diff` names every project's files; `since`, when
    the run began (the bar shows the rewriting at once if the run is already long); `named`: the
    summary says which project it is about (a run over several, whose summaries would otherwise
    contradict). The run's display shows the rewriting and the tests' update, and is paused before this project's
    lines are said."""
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
                    progress.pause()
                    message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                    raise Stopped(
                        f"selfcall-audit: cannot write the helper: {message}; no file of this project was rewritten",
                        EXIT_ERROR,
                    ) from None
            if received:
                progress.pause()
                raise Stopped(
                    f"selfcall-audit: interrupted; wrote {neutralise(shown(vendored))}, rewrote no file before stopping",
                    128 + received[0],
                )
        tests: list[ImpactedTest] = []
        updates: list[TestUpdate] = []
        recordings: list[Recording] = []
        if dry_run and plan.rewritten:
            progress.phase("updating tests")
            tests, updates, recordings = _test_updates(fixing)
        if not dry_run:
            plan.write(progress)
            if plan.rewritten and plan.interrupted is None:  # the tests of what was written
                progress.phase("updating tests")
                tests, updates, recordings = _test_updates(fixing)
                recorded = write_all(root, recordings)
                recordings = [r for r in recordings if r.path in recorded.written]
                plan.errors += [
                    f"{path}: {why}" for path, why in {**recorded.refused, **recorded.failed}.items()
                ]
                result = write_all(root, [update for update in updates if update.changed])
                for update in updates:
                    why = result.refused.get(update.path) or result.failed.get(update.path)
                    if why is None and update.changed and update.path not in result.written:
                        why = "not written: the run was interrupted first"
                    if why is not None:
                        update.left += [(test, why) for test in update.updated]
                        update.updated = []
                plan.errors += [f"{path}: {why}" for path, why in result.failed.items()]
                plan.interrupted = result.interrupted
            if created and not plan.rewritten and plan.interrupted is None:
                # every rewrite was refused as it was written (a file edited meanwhile, hard links):
                # nothing imports the copy, so it goes, as the run found the project
                with contextlib.suppress(OSError):
                    os.unlink(root / vendored)
                    vendored = None

    progress.pause()

    def say(line: str) -> None:  # with --diff, stdout carries the diff alone
        click.echo(neutralise(line), err=show_diff)

    for recording in recordings if not common.quiet else ():
        for line in recording.lines:
            verb = "would record" if dry_run else "records"
            say(
                f"{shown(recording.path)}:{line}: {verb} the app it builds, which the in-process helper calls"
            )
    if vendored and not common.quiet:
        say(
            f"{shown(vendored)}: {'would write' if dry_run else 'wrote'} the in-process helper the rewritten calls import"
        )
    if show_diff:
        # named from the outermost project's root, so that one patch applies to every project's files
        prefix = os.path.relpath(root, base).replace(os.sep, "/")

        def from_base(path: str) -> str:
            return path if prefix == "." else f"{prefix}/{path}"

        # the whole migration, as `git diff` would show it: the new helper file and the tests too
        patches = [(f.path, file_diff(from_base(f.path), f.before, f.after)) for f in plan.files if f.changed]
        patches += [(u.path, file_diff(from_base(u.path), u.before, u.after)) for u in updates if u.changed]
        patches += [(r.path, file_diff(from_base(r.path), r.before, r.after)) for r in recordings]
        if vendored:
            patches.append((vendored, new_file_diff(from_base(vendored), helper_source(vendored, root))))
        click.echo(b"".join(patch for _, patch in sorted(patches)), nl=False)
    rewritten = plan.rewritten
    # every line is a line of the file as the run leaves it: a written file's are where they moved to
    if not common.quiet:
        verb = "would rewrite" if dry_run else "rewrote"
        for _, outcome in rewritten:
            finding = outcome.finding
            line, _ = plan.position(finding.path, finding.line, finding.column)
            say(f"{shown(finding.path)}:{line}: {verb} self-call to {fixing.helper.name}")
        for file in plan.files:
            for line, name in file.removed_aliases if file.changed and file.write_error is None else ():
                line, _ = plan.position(file.path, line)
                say(
                    f"{shown(file.path)}:{line}: {'would remove' if dry_run else 'removed'} `{name} = ...`, "
                    "unused after the rewrite"
                )
    if not common.quiet:
        commands.say_excluded(plan.report)
    not_fixed = plan.not_fixed
    for finding, reason in not_fixed:
        line, column = plan.position(finding.path, finding.line, finding.column)
        say(f"{shown(finding.path)}:{line}:{column}: {finding.code} not rewritten: {reason}")
    for error in plan.report.errors:
        line, column = plan.position(error.path, error.line, error.column)
        say(f"{shown(error.path)}:{line}:{column}: {error.code} {error.message}")
    for error in plan.errors:
        click.echo(f"selfcall-audit: {neutralise(error)}", err=True)
    if not common.quiet:
        done = "Nothing to rewrite"
        if rewritten:
            files = plural(len({file.path for file, _ in rewritten}), "file")
            calls = plural(len(rewritten), "self-call")
            done = f"{'Would rewrite' if dry_run else 'Rewrote'} {calls} in {files}"
        left = (
            f"{plural(len(not_fixed), 'self-call')} to fix by hand"
            if not_fixed
            else "none left to fix by hand"
        )
        project = f"{shown('.')}/: " if named else ""
        say(f"{project}{done}; {left}.")
    if tests and not common.quiet:
        _report_tests(tests, updates, dry_run, say, shown)
    if common.verbose:
        click.echo(f"{plan.report.files_parsed} files parsed in {plan.report.seconds:.3f}s", err=True)
    if plan.interrupted is not None:
        written = sorted({neutralise(shown(file.path)) for file, _ in rewritten})
        raise Stopped(
            f"selfcall-audit: interrupted; rewrote {plural(len(written), 'file')} before stopping"
            + "".join(f"\n  {path}" for path in written),
            128 + plan.interrupted,
        )
    if plan.errors:
        return EXIT_ERROR
    failed = not_fixed or plan.report.inputs_failed  # a file that does not parse may hide one
    return EXIT_FINDINGS if failed or (dry_run and rewritten) else EXIT_CLEAN


def _test_updates(fixing: ProjectFix) -> tuple[list[ImpactedTest], list[TestUpdate], list[Recording]]:
    """The tests that model the HTTP self-call of the rewritten methods, their update, and the
    recording of the app each agent module builds, which the helper calls."""
    # libcst's, as the rewrites: loaded once there are rewrites (see `migrate.fixes`)
    from ..migrate.record_app import record_app
    from ..migrate.test_update import Target, update_tests

    root, rewritten = fixing.root, fixing.plan.rewritten
    methods = [Rewritten(o.finding.path, o.finding.method) for _, o in rewritten]
    assert fixing.plan.tests is not None  # `plan_fix` started the search beside the planning
    tests = fixing.plan.tests.of(methods, fixing.settings.jobs)
    # the helper as each rewritten module names it: the name its rewritten calls use
    targets = {o.finding.path: Target(module_name(file.path), o.callee) for file, o in rewritten}  # type: ignore[arg-type]
    first_party = functools.partial(is_first_party, root)
    updates = update_tests(root, tests, targets, line_length(root), first_party, fixing.settings.jobs)
    return tests, updates, record_app(root, fixing.settings.agent_bases)


def _report_tests(
    tests: list[ImpactedTest],
    updates: list[TestUpdate],
    dry_run: bool,
    say: Callable[[str], None],
    shown: Callable[[str], str],
) -> None:
    """Each test that modelled the HTTP self-call: updated to fake the helper, or left and why."""
    fate: dict[str, str] = {}
    for update in updates:
        for test in update.updated:
            done = "would fake" if dry_run else "now fakes"
            fate[test.node_id] = f"{done} the helper, sending the self-call to its server client as before"
        for test, why in update.left:
            fate[test.node_id] = f"left as it is: {why}; update it by hand"
    say(f"{plural(len(tests), 'test')} modelled the HTTP self-call:")
    for test in tests:  # node ids from the current folder, as the other paths: pytest takes them so
        path, _, name = test.node_id.partition("::")
        how = modelled(test.models, test.route)
        say(f"  {shown(path)}::{name}: {how}; {fate.get(test.node_id, 'left as it is')}")
