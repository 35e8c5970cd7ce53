"""One project's run: discover, then the stored result that still answers for the files as they
are, else the stages of `stages.py` (prefilter → facts → index → resolve → findings) over the
facts and workers of `analysing.py`; then what the paths asked about show.

Where facts come from (the cache, worker processes) and what a stored result depends on
(fingerprints) is the business of other modules: this one only puts the steps in order.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Settings
from ..ftypes import Analysis, Progress, Report
from ..workspace.discovery import FileSet, discover, in_scope
from ..workspace.listing import is_project_root
from .cache import FactsCache
from .fingerprint import Fingerprints
from .inputs import Inputs
from .scoping import cut_scopes, excluded, in_view, with_limits_hit

if TYPE_CHECKING:  # a run answered from its stored result loads none of these
    from ..workspace.listing import GitListing
    from .analysing import Analysing
    from .warm import Warm


class Project:
    """One analysis of one project root; front ends ask it for findings and inventory."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        progress: Progress | None = None,
        sources: Mapping[str, bytes] | None = None,
        warm: Warm | None = None,
        borrowed: Path | None = None,
    ):
        """`sources`: root-relative paths whose text is read from memory (an editor's unsaved buffer);
        `warm`: what earlier runs of a long-lived process learnt of the project, kept up to date;
        `borrowed`: the root of a project whose cache this one reads and never writes (the work
        tree's, for a commit of it written out elsewhere: its content-keyed entries hold for the
        files the two share, whatever their folder)."""
        self.root = root
        self.warm = warm
        self.settings = settings
        self.progress = progress or Progress()
        # No pyproject.toml or .git marks the folder (a home folder, `/`): no cache is written there,
        # whichever front end runs (the command line, flake8, the pytest helper). Text from memory
        # is not what the cache's fingerprints (of the files on disk) describe: no cache then.
        home = borrowed or root
        cached = settings.cache_dir and not sources and not warm and is_project_root(os.fspath(home))
        self.cache = FactsCache.open(home, settings.cache_dir, read_only=bool(borrowed)) if cached else None
        self.inputs = Inputs(root, settings, self.cache, sources, warm)
        self._analysing: Analysing | None = None  # what a run that parses needs, made when it does
        self.listed_sources: list[str] = []  # the Python files of the last analysis

    @property
    def files_parsed(self) -> int:
        return self._analysing.files_parsed if self._analysing else 0

    def analysing(self) -> Analysing:
        """The facts and the workers of a run that parses, loaded and made when first needed."""
        if self._analysing is None:
            from .analysing import Analysing

            self._analysing = Analysing(self.inputs, self.settings, self.progress, self.warm)
        return self._analysing

    def release(self) -> None:
        """Drop what the runs parsed with (see `Analysing.release`)."""
        if self._analysing is not None:
            self._analysing.release()
            self._analysing = None

    # pipeline ----------------------------------------------------------------------------
    def analyze(
        self,
        paths: Iterable[Path] = (),
        inventory: bool = False,
        early: GitListing | None = None,
        located: bool = False,
    ) -> Report:
        """Findings for `paths` (default: the whole project); `inventory` also lists YAML instances
        per agent, which needs every entrypoint module; `early`: git's listing, started before;
        `located`: only the findings located in `paths` (an editor's diagnostics of a file), not
        those elsewhere whose evidence is there, so the modules importing them are not searched."""
        started = time.perf_counter()
        scopes = cut_scopes(self.root, paths)
        whole = not scopes or "" in scopes
        files = self.warm.files if self.warm else None
        if files is None:
            self.progress.phase("listing files")
            files = discover(
                self.root,
                self.settings.exclude,
                self.settings.include_tests,
                self.settings.config_globs,
                nested=self.settings.nested_projects,
                early=early,
            )
            if self.warm:
                self.warm.files = files
        self.listed_sources = files.sources
        self.inputs.statuses = files.statuses
        fingerprints = Fingerprints(self.settings, files) if self.cache else None
        fingerprint = (
            fingerprints.of_settled(self.cache, self.inputs.key, self.inputs.content_keys)
            if fingerprints
            else None
        )
        try:  # reusing a result may parse a few files too: the workers stop either way
            result = self._stored(files, fingerprints, fingerprint, inventory)
            analysed = result is None
            if analysed:
                from .stages import analyse  # the analysis' modules: not for a result that holds

                result = analyse(self.analysing(), files, fingerprints, scopes, whole, inventory, located)
        finally:
            if self._analysing is not None:
                self._analysing.close()
        if self.cache:
            if analysed and whole and fingerprint and not self.inputs.failed:
                self.cache.put_snapshot(fingerprint, result._asdict(), self.analysing().observed)
            # a reused result saves too: the content keys this run learned of files that have
            # settled since they were last recorded spare the next run reading them again
            self.cache.save(prune=analysed and whole)
        shown = in_view(result.findings, scopes)
        findings = [f for f in shown if self.settings.selects(f.code)]
        return Report(
            root=self.root,
            findings=findings,
            errors=with_limits_hit([e for e in result.errors if in_scope(e.path, scopes)], shown, findings),
            files_scanned=result.files_scanned,
            files_parsed=self.files_parsed,
            agent_count=result.agent_count,
            agents=result.agents or [],
            seconds=time.perf_counter() - started,
            suppressed=result.suppressed,
            projects=tuple(
                Path(os.path.realpath(self.root / folder))
                for folder in files.projects
                if in_scope(folder, scopes)
            ),
            excluded=excluded(files, scopes),
        )

    def _stored(
        self, files: FileSet, fingerprints: Fingerprints | None, fingerprint: str | None, inventory: bool
    ) -> Analysis | None:
        """A whole-project result kept for these very files, or the last one stored, when it
        still holds for them as they are now (then kept again under their new fingerprint)."""
        if not (self.cache and fingerprints and fingerprint):
            return None
        stored = self.cache.snapshot(fingerprint)
        if stored is not None:
            if stored["agents"] is None and inventory:
                return None
            unchanged = all(self.inputs.key(rel) == key for rel, key in stored["outside"].items())
            return Analysis(**stored) if unchanged else None
        last = self.cache.observed()
        if last is None:
            return None
        stored = self.cache.snapshot(last[0])
        if stored is None or (stored["agents"] is None and inventory):
            return None
        unusable = {*files.configs, *(e.path for e in stored["errors"])}
        observed = self.analysing().still_holds(last[1], fingerprints, files, unusable)
        if observed is None or self.inputs.failed:
            return None
        result = Analysis(**stored)
        result = result._replace(outside={rel: observed["parsed"][rel][0] for rel in result.outside})
        self.cache.put_snapshot(fingerprint, result._asdict(), observed)
        self.cache.save(prune=False)
        return result
