"""A run that cannot answer from a stored result: the facts store and the worker pool, the
stages that parse and resolve, and the check that a stored result still holds after an edit.

`project.py` loads this module when a run first needs it: a run answered from its stored result
(a warm scan) never does, and so loads none of the modules below (what that saves:
`benchmarks/deferred_imports.py`). The analysis' own modules load later still, when a run
resolves: the check that a stored result still holds parses the edited files only."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from ..analysis.limits import LIMITS
from ..config import Settings
from ..ftypes import AgentInfo, Analysis, InputError, Progress
from ..workspace.discovery import FileSet, UnreadableFile, read_file
from ..workspace.workers import Workers
from .cache import content_key
from .comments import outline
from .indexes import Indexes
from .inputs import Inputs
from .resolving import Evaluation
from .reuse import observe, still_holds
from .store import FactsStore

if TYPE_CHECKING:
    from ..analysis.facts import ModuleFacts
    from ..analysis.hierarchy import Hierarchy
    from ..analysis.resolve import Resolver
    from .fingerprint import Fingerprints
    from .reuse import Observed
    from .warm import Warm


class Analysing:
    """The facts and the workers of one `Project`'s runs, and the stages that need them."""

    def __init__(self, inputs: Inputs, settings: Settings, progress: Progress, warm: Warm | None):
        self.inputs = inputs
        self.settings = settings
        self.progress = progress
        self.warm = warm
        self.observed: Observed | None = None  # what a whole run saw, for `reuse`
        self._parsing = False  # the phase the parsed files are counted in (not those parsed on demand)
        self._store: FactsStore | None = None
        self._workers: Workers | None = None  # started by the first batch that repays them

    @property
    def files_parsed(self) -> int:
        return self._store.parsed if self._store else 0

    def facts(self, rel: str) -> ModuleFacts | None:
        return self.store().facts(rel)

    def same_facts(self, rel: str, then: str) -> bool:
        """Are the file's facts now those of its bytes of content key `then`? Their cache entries'
        bytes answer first, sparing the decoding of the stored facts and a comparison of every
        field (about 1.5 ms of a one-file run after a comment in a 1,000-line agent file)."""
        now = self.facts(rel)
        cache = self.inputs.cache
        if now is None or cache is None:
            return False
        if cache.same_facts(then, self.inputs.key(rel)):  # type: ignore[arg-type]
            return True
        return cache.facts(rel, then) == now

    def still_holds(
        self, last: Observed, fingerprints: Fingerprints, files: FileSet, unusable: set[str]
    ) -> Observed | None:
        """What the files as they are now show of `last`, a whole run's observations, when its
        result holds for them too (see `reuse.still_holds`); None otherwise."""
        return still_holds(
            last,
            fingerprints.setup,
            self.inputs.contents(files),
            files.sources,
            unusable=unusable,
            base_tokens=self.inputs.tokens,
            read=self.inputs.read,
            key=self.inputs.key,
            same_facts=self.same_facts,
        )

    def preload(self, rels: Iterable[str]) -> None:
        """Facts for many files at once: from the cache, else parsed (in parallel when it pays)."""
        self.store().preload(rels)

    def store(self) -> FactsStore:
        if self._store is None:
            memory = self.warm.facts if self.warm else None
            functions = self.warm.functions if self.warm else None
            self._store = FactsStore(self.inputs, self.pool(), self._parsed, memory, functions)
        return self._store

    def pool(self) -> Workers:
        if self._workers is None:
            self._workers = Workers(self.settings.jobs)
        return self._workers

    def close(self) -> None:
        """Stop the workers, if they started: a run's end."""
        if self._workers is not None:
            self._workers.close()

    def release(self) -> None:
        """Drop the facts store and the workers: they call back into this object, a cycle that
        a long-lived caller which freezes what it keeps (`api.Session`) would never see freed."""
        self._store = None
        self._workers = None

    def phase(self, name: str) -> None:
        self._parsing = name == "parsing"
        self.progress.phase(name)

    def _parsed(self, rel: str, done: int, total: int) -> None:
        if self._parsing:
            self.progress(rel, done, total)

    def analyse(
        self,
        files: FileSet,
        fingerprints: Fingerprints | None,
        scopes: tuple[str, ...],
        whole: bool,
        inventory: bool,
        located: bool = False,
    ) -> Analysis:
        """What the stages find in the files as they are now (see `Project.analyze`)."""
        from ..analysis.facts import Inlined
        from ..analysis.hierarchy import Hierarchy
        from ..analysis.index import ClassRef, Index
        from ..analysis.resolve import Resolver
        from .targets import Targets

        settings = self.settings
        self.inputs.errors.update(files.errors)
        store = self.store()
        names, paths = None, None
        if self.warm:  # what the last runs worked out of the same facts and listing
            if self.warm.paths is None or self.warm.paths[0] is not files:
                self.warm.paths = (files, {})
            names, paths = self.warm.names, self.warm.paths[1]
        index = Index(set(files.modules), store.facts, names, paths)
        bases = frozenset(settings.agent_bases)
        indexes = Indexes(self.inputs, files, self.pool())
        instances = indexes.instances(
            fingerprints.of(self.inputs.key, files.configs) if fingerprints else None, background=whole
        )
        # For the one-file runs to come, not this one: indexed by a worker while this process parses.
        indexed = indexes.index_imports(files.sources) if whole and not self.warm else lambda: None
        self.phase("parsing")

        def search(rels: Iterable[str], names: Collection[str]) -> list[str]:
            """The word index's answer when it has one (the files it vouches for are not read
            again), else the files searched, by the workers when they run."""
            return (
                indexes.naming(names)
                if indexes.answers(names)
                else self.inputs.naming(rels, names, self.pool())
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
            sharing = None if self.warm else self.pool()
            # Files named one by one (pre-commit's changed files) are always read: their errors show.
            self.preload([rel for rel in files.sources if rel in scopes])
        source_set = set(files.sources)
        self.phase("resolving agents")
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
            self.observed = observe(
                fingerprints.setup,
                self.inputs.contents(files),
                parsed,
                rounds,
                searched,
                resolver.posters,
                {rel: _outline_of(self.inputs, rel, key) for rel, key in parsed.items()},
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


def _outline_of(inputs: Inputs, rel: str, key: str) -> str | None:
    """The outline (see `comments`) of the bytes of content key `key`; None if the file no
    longer holds them or cannot be read."""
    data = inputs.peek(rel)
    if data is None:
        try:
            data = read_file(os.path.join(inputs.root, rel), inputs.settings.max_file_size)
        except UnreadableFile:
            return None
    return outline(data)[0] if content_key(rel, data) == key else None
