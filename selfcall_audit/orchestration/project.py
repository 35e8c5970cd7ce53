"""The analysis pipeline: discover → prefilter → facts → index → resolve → findings.

Where facts come from (the cache, worker processes) and what a stored result depends on
(fingerprints) is the business of `workspace/`: this module only puts the stages in order.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..analysis.limits import LIMITS
from ..config import Settings
from ..ftypes import AgentInfo, Finding, InputError, Progress, Report
from ..workspace.discovery import FileSet, discover, in_scope
from ..workspace.listing import is_project_root
from ..workspace.workers import Workers
from .cache import FactsCache
from .fingerprint import Fingerprints
from .indexes import Indexes
from .inputs import Inputs
from .resolving import Evaluation
from .reuse import observe, still_holds
from .scoping import cut_scopes, excluded, in_view, with_limits_hit
from .store import FactsStore

if TYPE_CHECKING:  # the analysis modules load only when a run analyses: not on a cache hit
    from ..analysis.facts import ModuleFacts
    from ..analysis.hierarchy import Hierarchy
    from ..analysis.resolve import Resolver
    from ..workspace.listing import GitListing
    from .reuse import Observed
    from .warm import Warm


class Analysis(NamedTuple):
    """What a run found before selection and scoping: the part a snapshot can keep."""

    findings: list[Finding]  # every rule, `noqa` already applied
    suppressed: int
    errors: list[InputError]  # by path
    files_scanned: int
    agent_count: int
    agents: list[AgentInfo] | None  # only when the inventory was asked for
    outside: dict[str, str]  # content keys of parsed non-source files


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
        self._parsing = False  # the phase the parsed files are counted in (not those parsed on demand)
        self._observed: Observed | None = None  # what a whole run saw, for `reuse`
        # No pyproject.toml or .git marks the folder (a home folder, `/`): no cache is written there,
        # whichever front end runs (the command line, flake8, the pytest helper). Text from memory
        # is not what the cache's fingerprints (of the files on disk) describe: no cache then.
        home = borrowed or root
        cached = settings.cache_dir and not sources and not warm and is_project_root(os.fspath(home))
        self.cache = FactsCache.open(home, settings.cache_dir, read_only=bool(borrowed)) if cached else None
        self.inputs = Inputs(root, settings, self.cache, sources, warm)
        self._store: FactsStore | None = None
        self._workers: Workers | None = None  # started by the first batch that repays them
        self.listed_sources: list[str] = []  # the Python files of the last analysis

    @property
    def files_parsed(self) -> int:
        return self._store.parsed if self._store else 0

    def _facts(self, rel: str) -> ModuleFacts | None:
        return self._facts_store().facts(rel)

    def _same_facts(self, rel: str, then: str) -> bool:
        """Are the file's facts now those of its bytes of content key `then`? Their cache entries'
        bytes answer first, sparing the decoding of the stored facts and a comparison of every
        field (about 1.5 ms of a one-file run after a comment in a 1,000-line agent file)."""
        now = self._facts(rel)
        if now is None or self.cache is None:
            return False
        if self.cache.same_facts(then, self.inputs.key(rel)):  # type: ignore[arg-type]
            return True
        return self.cache.facts(rel, then) == now

    def preload(self, rels: Iterable[str]) -> None:
        """Facts for many files at once: from the cache, else parsed (in parallel when it pays)."""
        self._facts_store().preload(rels)

    def release(self) -> None:
        """Drop the facts store and the workers: they call back into the project, a cycle that
        a long-lived caller which freezes what it keeps (`api.Session`) would never see freed."""
        self._store = None
        self._workers = None

    def _facts_store(self) -> FactsStore:
        if self._store is None:
            memory = self.warm.facts if self.warm else None
            functions = self.warm.functions if self.warm else None
            self._store = FactsStore(self.inputs, self._pool(), self._parsed, memory, functions)
        return self._store

    def _parsed(self, rel: str, done: int, total: int) -> None:
        if self._parsing:
            self.progress(rel, done, total)

    def _phase(self, name: str) -> None:
        self._parsing = name == "parsing"
        self.progress.phase(name)

    def _pool(self) -> Workers:
        if self._workers is None:
            self._workers = Workers(self.settings.jobs)
        return self._workers

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
            self._phase("listing files")
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
                result = self._analyze(files, fingerprints, scopes, whole, inventory, located)
        finally:
            if self._workers is not None:
                self._workers.close()
        if self.cache:
            if analysed and whole and fingerprint and not self.inputs.failed:
                self.cache.put_snapshot(fingerprint, result._asdict(), self._observed)
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
        observed = still_holds(
            last[1],
            fingerprints.setup,
            self.inputs.contents(files),
            files.sources,
            unusable={*files.configs, *(e.path for e in stored["errors"])},
            base_tokens=self.inputs.tokens,
            read=self.inputs.read,
            key=self.inputs.key,
            same_facts=self._same_facts,
        )
        if observed is None or self.inputs.failed:
            return None
        result = Analysis(**stored)
        result = result._replace(outside={rel: observed["parsed"][rel][0] for rel in result.outside})
        self.cache.put_snapshot(fingerprint, result._asdict(), observed)
        self.cache.save(prune=False)
        return result

    def _analyze(
        self,
        files: FileSet,
        fingerprints: Fingerprints | None,
        scopes: tuple[str, ...],
        whole: bool,
        inventory: bool,
        located: bool = False,
    ) -> Analysis:
        from ..analysis.facts import Inlined
        from ..analysis.hierarchy import Hierarchy
        from ..analysis.index import ClassRef, Index
        from ..analysis.resolve import Resolver
        from .targets import Targets

        settings = self.settings
        self.inputs.errors.update(files.errors)
        store = self._facts_store()
        names, paths = None, None
        if self.warm:  # what the last runs worked out of the same facts and listing
            if self.warm.paths is None or self.warm.paths[0] is not files:
                self.warm.paths = (files, {})
            names, paths = self.warm.names, self.warm.paths[1]
        index = Index(set(files.modules), store.facts, names, paths)
        bases = frozenset(settings.agent_bases)
        indexes = Indexes(self.inputs, files, self._pool())
        instances = indexes.instances(
            fingerprints.of(self.inputs.key, files.configs) if fingerprints else None, background=whole
        )
        # For the one-file runs to come, not this one: indexed by a worker while this process parses.
        indexed = indexes.index_imports(files.sources) if whole and not self.warm else lambda: None
        self._phase("parsing")

        def search(rels: Iterable[str], names: Collection[str]) -> list[str]:
            """The word index's answer when it has one (the files it vouches for are not read
            again), else the files searched, by the workers when they run."""
            return (
                indexes.naming(names)
                if indexes.answers(names)
                else self.inputs.naming(rels, names, self._pool())
            )

        chosen = Targets(
            files.sources, files.statuses, self.inputs.names_a_base, search, indexes.naming, store
        )
        targets = None
        sharing: Workers | None = None
        only: dict[str, tuple[ClassRef, ...]] = {}  # modules evaluated with these agents first
        # kept by a long-lived process from one run to the next
        sites = self.warm.sites if self.warm else None
        inlined = Inlined(self.warm.inlined) if self.warm else None
        if self.warm:
            self.warm.inlined = inlined
        if not whole:
            hierarchy = Hierarchy(index, bases, chosen.naming)
            mentions = functools.partial(self.warm.mentions, read=self.inputs.read) if self.warm else None
            resolver = Resolver(
                hierarchy, settings, instances(), self.inputs.read, mentions, sites, inlined, store.edited
            )
            if located:
                targets = chosen.located(scopes)
            elif (scoped := chosen.scoped(scopes, instances(), resolver, indexes.import_lines)) is not None:
                targets, only = scoped
        if targets is None:
            hierarchy = Hierarchy(index, bases)
            # the YAML instances are read when first needed: the prefilter runs meanwhile
            resolver = Resolver(
                hierarchy,
                settings,
                instances,
                read=self.inputs.read,
                sites=sites,
                inlined=inlined,
                parsed=store.edited,
            )
            targets, rounds, searched, naming_agents = chosen.whole(hierarchy)
            indexes.keep_names(set().union(*searched), naming_agents)
            if not whole and not self.warm:  # too many files in scope: as a whole run
                indexed = indexes.index_imports(files.sources)
            # every module evaluated, a share by each core: by processes forked now
            sharing = None if self.warm else self._pool()
            # Files named one by one (pre-commit's changed files) are always read: their errors show.
            self.preload([rel for rel in files.sources if rel in scopes])
        source_set = set(files.sources)
        self._phase("resolving agents")
        evaluation = Evaluation(resolver, store, only, source_set, self.progress)
        targets = list(dict.fromkeys(targets))
        indexed()
        if sharing is not None:
            instances()  # out of the workers before they stop
        findings, suppressed = evaluation.run(targets, sharing)
        for rel, helper in sorted(resolver.cut.items()):
            message = (
                f"helpers forward a server-client call more than {LIMITS.helper_depth} deep: "
                f"{helper} and what it calls were not followed (a self-call there is not reported)"
            )
            self.inputs.errors.setdefault(rel, InputError(rel, message, "too_deep"))
        for rel, (name, line) in sorted(index.cut.items()):
            message = (
                f"`{name}` is re-exported through more than {LIMITS.import_depth} modules: it was not "
                "followed further (a self-call through it is not reported)"
            )
            self.inputs.errors.setdefault(rel, InputError(rel, message, "too_deep", line))
        if fingerprints and whole:
            parsed = store.keys()
            self._observed = observe(
                fingerprints.setup,
                self.inputs.contents(files),
                parsed,
                rounds,
                searched,
                resolver.posters,
                {rel: self.inputs.outline_of(rel, key) for rel, key in parsed.items()},
            )
        return Analysis(
            findings=sorted(set(findings), key=lambda f: f.sort_key),
            suppressed=suppressed,
            errors=[self.inputs.errors[rel] for rel in sorted(self.inputs.errors)],
            files_scanned=len(files.sources) + len(files.configs),
            agent_count=sum(
                1
                for rel in dict.fromkeys(targets)
                if (module := index.module(rel)) is not None
                for klass in module.classes
                if hierarchy.is_agent_class(ClassRef(rel, klass.name))
            ),
            agents=self._inventory(hierarchy, resolver, instances()) if inventory else None,
            outside={rel: key for rel, key in store.keys().items() if rel not in source_set}
            if fingerprints
            else {},
        )

    def _inventory(self, hierarchy: Hierarchy, resolver: Resolver, instances: list) -> list[AgentInfo]:
        from ..analysis.index import ClassRef

        index = hierarchy.index
        agents = []
        for module in index.parsed():
            for klass in module.classes:
                ref = ClassRef(module.path, klass.name)
                if not hierarchy.is_agent_class(ref):
                    continue
                bases = tuple(b if isinstance(b, str) else index.qualname(b) for b in hierarchy.bases(ref))
                names = tuple(sorted({i.name for i in instances if ref in resolver.served_classes(i)}))
                agents.append(
                    AgentInfo(klass.name, module.path, klass.line, bases, names, *hierarchy.recognised(ref))
                )
        return sorted(agents, key=lambda a: (a.path, a.line))
