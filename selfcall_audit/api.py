"""The one way into the analysis: the command line, flake8, the pytest helper, the language server
and the stage specs all call these, so that a run means the same whatever starts it.

    report = analyze(["responses_api_agents"])           # findings, errors, agents
    report = analyze([path], sources={path: b"..."})      # an editor's unsaved text
    plan = plan_fix(root, settings, [root], helper)       # the rewrites `fix` would write
    session = Session(root, settings)                     # a long-lived process (the language
    report = session.analyze([path], {rel: b"..."})       # server): the project's facts kept warm
    settle()                                              # once the answer is sent

Each project under the paths (a monorepo's nested ones included) is analysed on its own, with its
own root and settings, and the results merged into one `Report` whose paths are relative to the
outermost root.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Settings, load_settings, python_floor
from .ftypes import Progress, Report
from .migrate.copies import code_digest, stale_copies
from .orchestration.project import Project
from .orchestration.projects import Projects, by_project, merged
from .orchestration.warm import Warm
from .rules import STALE_HELPER
from .workspace.listing import GitListing

if TYPE_CHECKING:
    from .migrate.codemod import FixPlan
    from .migrate.fixes import Helper

__all__ = [
    "Projects",
    "Report",
    "Session",
    "analyze",
    "analyze_projects",
    "by_project",
    "grouped",
    "plan_fix",
]


def grouped(
    paths: Iterable[str | os.PathLike[str]], settings_for: Callable[[Path], Settings] = load_settings
) -> tuple[Path, Projects]:
    """The folder a report of `paths` is relative to, and their projects, each under its own
    settings (`settings_for(root)`); no paths: the project around the current folder."""
    root, groups = by_project(tuple(Path(p) for p in paths))
    return root, Projects(groups, settings_for)


def analyze_projects(
    projects: Projects,
    root: Path,
    *,
    sources: Mapping[str | os.PathLike[str], bytes] | None = None,
    progress: Progress | None = None,
    inventory: bool = False,
    early: GitListing | None = None,
) -> Report:
    """One report of every project of the run, the nested ones each analysis finds included.
    `sources`: files whose text is read from memory instead of the disk (no cache is used then);
    `inventory`: list every agent with its YAML instances; `early`: git's listing, started before."""
    texts = {os.path.abspath(path): data for path, data in (sources or {}).items()}
    parts = []
    for project_root, settings, paths in projects:
        own = {
            os.path.relpath(path, project_root).replace(os.sep, "/"): data
            for path, data in texts.items()
            if Path(path).is_relative_to(project_root)
        }
        borrowed = projects.borrowed(project_root)
        project = Project(project_root, settings, progress=progress, sources=own, borrowed=borrowed)
        report = _analyzed(project, paths, inventory=inventory, early=early)
        floor = python_floor(project_root)
        if (
            floor is not None
            and floor > sys.version_info[:2]
            and any(e.kind == "syntax" for e in report.errors)
        ):
            report = report._replace(needs_python=floor)
        projects.found(report)
        parts.append(report)
    return merged(parts, root)


def _analyzed(project: Project, paths: Iterable[Path], **options: object) -> Report:
    """The project's report, with the stale copies of the helper (SCA004) whatever the scope, and
    each SCA900 entry judged by the project's strictness (`InputError.gated`)."""
    report = project.analyze(paths, **options)
    errors = [error.gated(project.settings.strict) for error in report.errors]
    report = report._replace(errors=errors, inputs_failed=any(error.fails for error in errors))
    if not project.settings.selects(STALE_HELPER):
        return report
    digest = functools.partial(project.inputs.remembered, compute=code_digest)  # once per copy, not per run
    stale = stale_copies(project.root, project.listed_sources, project.settings.helper, digest)
    return report._replace(findings=sorted(report.findings + stale, key=lambda f: f.sort_key))


def analyze(
    paths: Iterable[str | os.PathLike[str]] = (),
    *,
    settings_for: Callable[[Path], Settings] = load_settings,
    sources: Mapping[str | os.PathLike[str], bytes] | None = None,
    progress: Progress | None = None,
    inventory: bool = False,
) -> Report:
    """The findings for `paths` (files or folders; none: the project around the current folder),
    each project's whole tree indexed whatever part is reported on."""
    root, projects = grouped(paths, settings_for)
    return analyze_projects(projects, root, sources=sources, progress=progress, inventory=inventory)


def plan_fix(
    root: Path,
    settings: Settings,
    paths: Iterable[Path],
    helper: Helper,
    progress: Progress | None = None,
    early: GitListing | None = None,
) -> FixPlan:
    """Analyse one project and compute the new text of every file with fixable self-calls, from
    the very bytes the analysis read; nothing is written. `early`: git's listing, started before."""
    # The codemod is libcst's, which takes longer to import than a warm scan takes to run: it loads
    # for a fix only (tests/test_cache.py checks that a scan never loads it).
    from .migrate.codemod import plan_rewrites

    project = Project(root, settings, progress=progress)
    report = _analyzed(project, paths, early=early)
    tests = (settings.route, settings.exclude)  # searched for beside the planning
    return plan_rewrites(root, report, project.inputs.read, helper, progress, settings.jobs, tests)


def settle() -> None:
    """Free the last runs' garbage and freeze what is left, out of the collector's sight: what a
    long-lived process keeps (a session's facts) lives as long as it does, and full passes over it
    took a sixth of an edited NeMo Gym agent's re-analysis. The runs' own cycles go first, or
    frozen they would never be freed (the collection walks only what was made since the last
    freeze: about 1 ms after an edit). For a server to call once its answer is sent."""
    gc.collect()
    gc.freeze()


class Session:
    """One project analysed again and again by a long-lived process (the language server): what a
    run learns of the files is kept for the next (see `orchestration.warm`), so that an edited
    buffer costs the facts of that one file and the agents it can affect."""

    def __init__(self, root: Path, settings: Settings):
        self.root = root
        self.settings = settings.with_overrides(cache_dir="")  # the memory is the cache
        self._warm = Warm()
        self._last: Project | None = None

    def analyze(
        self,
        paths: Iterable[Path] = (),
        sources: Mapping[str, bytes] | None = None,
        located: bool = False,
    ) -> Report:
        """The report of `paths` (default: the whole project); `sources`: files (root-relative)
        whose text is read from memory, an editor's unsaved buffers; `located`: only the findings
        located in `paths` (an editor's diagnostics of a file), the quickest to have again."""
        if self._last is not None:
            self._last.release()
        self._last = Project(self.root, self.settings, sources=sources, warm=self._warm)
        return _analyzed(self._last, paths, located=located)

    def plan_fix(self, path: Path, helper: str, sources: Mapping[str, bytes] | None = None) -> FixPlan:
        """What `fix` would write for the file `path`, calling the helper `helper` (MODULE:NAME),
        from the text in `sources` where it is there."""
        from .migrate.codemod import plan_rewrites  # libcst: loaded for a fix only, as in `plan_fix`
        from .migrate.fixes import Helper

        report = self.analyze([path], sources, located=True)
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        mine = report._replace(findings=[f for f in report.findings if f.path == rel])
        return plan_rewrites(self.root, mine, self._last.inputs.read, Helper.parse(helper))

    def changed(self, paths: Iterable[str | os.PathLike[str]] | None = None) -> None:
        """Files (absolute, or relative to the root) changed on the disk; None: anything may have
        (files created or deleted): the listing is made again."""
        if paths is None:
            self._warm.changed(None)
        else:
            self._warm.changed(
                os.path.relpath(os.path.abspath(self.root / p), self.root).replace(os.sep, "/") for p in paths
            )
