"""The analysis pipeline: discover → prefilter → facts → index → resolve → findings.

Where facts come from (the cache, worker processes) and what a stored result depends on
(fingerprints) is the business of `workspace/`: this module only puts the stages in order.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from ..analysis.limits import LIMITS
from ..config import Settings
from ..ftypes import AgentInfo, Finding, InputError, Progress, Report
from ..workspace.discovery import FileSet, Status, TooLarge, UnreadableFile, discover, in_scope, read_file
from ..workspace.listing import is_project_root
from ..workspace.prefilter import base_tokens, mentions_any, word_matcher
from ..workspace.workers import Workers
from .cache import FactsCache, content_key, keep_last
from .comments import outline
from .fingerprint import Fingerprints
from .indexes import Indexes
from .jobs import Search, files_naming
from .resolving import Evaluation
from .reuse import observe, still_holds
from .store import FactsStore

if TYPE_CHECKING:  # the analysis modules load only when a run analyses: not on a cache hit
    from ..analysis.facts import ModuleFacts
    from ..analysis.hierarchy import Hierarchy
    from ..analysis.resolve import Resolver
    from ..workspace.listing import GitListing
    from .reuse import Observed
    from .warm import Warm


T = TypeVar("T")


class Analysis(NamedTuple):
    """What a run found before selection and scoping: the part a snapshot can keep."""

    findings: list[Finding]  # every rule, `noqa` already applied
    suppressed: int
    errors: list[InputError]  # by path
    files_scanned: int
    agent_count: int
    agents: list[AgentInfo] | None  # only when the inventory was asked for
    outside: dict[str, str]  # content keys of parsed non-source files


def _cut_scopes(root: Path, paths: Iterable[Path]) -> tuple[str, ...]:
    scopes = []
    for path in paths:
        # A link named on the command line that leads nowhere (broken, a loop) or out of the root
        # (to a device, a file elsewhere) is its own scope: the listed file it is, read as a
        # whole-project scan reads it.
        link = os.path.islink(path)
        real = None if link and not os.path.exists(path) else path.resolve()
        if link and (real is None or not real.is_relative_to(root)):
            real = Path(os.path.realpath(os.path.dirname(os.path.abspath(path))), path.name)
        rel = os.path.relpath(real, root)
        scopes.append("" if rel == "." else rel.replace(os.sep, "/"))
    return tuple(scopes)


_SEARCHES = 8  # parts of the files a later prefilter round reads again, shared out among the workers


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
        self.errors: dict[str, InputError] = {}
        self._bytes: dict[str, bytes] = dict(sources or {})
        self.memory = frozenset(self._bytes)  # the files read from memory
        self._let_go: set[str] = set()  # read, their bytes not kept (see `read`)
        self._tokens = base_tokens(settings.agent_bases, settings.route)
        self._keys: dict[str, str | None] = {}
        self._statuses: Mapping[str, Status] = {}  # of the last listing, as `FileSet.statuses`
        # Files that could not be read (not those skipped for their size) or parsed: a result that
        # met one is never stored, so that it is looked at again once it can be.
        self.failed: set[str] = set()
        self._observed: Observed | None = None  # what a whole run saw, for `reuse`
        # No pyproject.toml or .git marks the folder (a home folder, `/`): no cache is written there,
        # whichever front end runs (the command line, flake8, the pytest helper). Text from memory
        # is not what the cache's fingerprints (of the files on disk) describe: no cache then.
        home = borrowed or root
        cached = settings.cache_dir and not sources and not warm and is_project_root(os.fspath(home))
        self.cache = FactsCache.open(home, settings.cache_dir, read_only=bool(borrowed)) if cached else None
        self._store: FactsStore | None = None
        self._workers: Workers | None = None  # started by the first batch that repays them
        self.listed_sources: list[str] = []  # the Python files of the last analysis

    @property
    def files_parsed(self) -> int:
        return self._store.parsed if self._store else 0

    # input -------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes | None:
        """The file's bytes; None, with an SCA900 entry saying why, when they cannot be had.

        Read once and kept, but a file that names no agent base at its first reading is let go
        (most files: their bytes were a fifth of a cold scan's memory), its content key worked out
        then: read again, its bytes must be those the key is of."""
        if (data := self.peek(rel)) is not None:
            return data
        try:
            data = read_file(os.path.join(self.root, rel), self.settings.max_file_size)
        except TooLarge as exc:
            self.errors[rel] = exc.entry(rel)
            self._keys[rel] = f"skipped:{exc.size}"  # what it holds does not matter, its size does
            return None
        except UnreadableFile as exc:
            self.errors[rel] = exc.entry(rel)
            self.failed.add(rel)
            return None
        if self.warm:
            self.warm.remember(rel, data)
        elif rel in self._let_go:
            if content_key(rel, data) != self._keys.get(rel):
                self._changed(rel)
                return None
            self._bytes[rel] = data  # needed after all
        elif rel in self.memory or mentions_any(data, self._tokens):
            self._bytes[rel] = data
        else:
            if rel not in self._keys:
                self._learn_key(rel, data)
            self._let_go.add(rel)
        return data

    def peek(self, rel: str) -> bytes | None:
        """The file's bytes if they were read already and kept (or are in memory), else None."""
        data = self._bytes.get(rel)
        if data is None and self.warm is not None:
            data = self.warm.disk.get(rel)
        return data

    def names_a_base(self, rel: str) -> bool:
        """Does the file name an agent base class or register an agent route (see `base_tokens`)?"""
        return rel not in self._let_go and mentions_any(self.read(rel), self._tokens)

    def naming(self, rels: Iterable[str], names: Collection[str]) -> list[str]:
        """The files among `rels` (all read before) that name one of `names` as a whole word: the
        bytes kept are searched here, the files let go are read again by the workers when they
        run (here otherwise), each checked to be as it was."""
        rels = list(rels)
        named = word_matcher(names)
        found = {rel for rel in rels if named(self.peek(rel))}
        again = [rel for rel in rels if rel in self._let_go and rel not in self._bytes]
        searches = [
            Search(self.root, tuple(again[part::_SEARCHES]), tuple(names), self.settings.max_file_size)
            for part in range(_SEARCHES)
        ]
        for chunk in self._pool().map(files_naming, searches):
            for rel, key, hit in chunk:
                if key is None:  # it cannot be read now: `read` says why
                    self.read(rel)
                elif key != self._keys.get(rel):
                    self._changed(rel)
                elif hit:
                    found.add(rel)
        return [rel for rel in rels if rel in found]

    def _changed(self, rel: str) -> None:
        self.errors[rel] = UnreadableFile("file changed during the scan").entry(rel)
        self.failed.add(rel)

    def key(self, rel: str) -> str | None:
        """What the file's results depend on: its path and bytes (its size, when it is skipped for
        its size); None when it cannot be read. Not read again when its status is the one the
        cache recorded with its key."""
        if rel not in self._keys:
            status = self._statuses.get(rel)
            if self.cache is not None and (known := self.cache.known_key(rel, status)) is not None:
                self._keys[rel] = known
                return known
            data = self.read(rel)
            if rel not in self._keys:  # `read` worked out the key of a file it let go
                self._learn_key(rel, data)
        return self._keys[rel]

    def _learn_key(self, rel: str, data: bytes | None) -> None:
        self._keys[rel] = None if data is None else content_key(rel, data)
        if data is not None and self.cache is not None:
            self.cache.keep_key(rel, self._keys[rel])

    def _outline(self, rel: str, key: str) -> str | None:
        """The outline (see `comments`) of the bytes of content key `key`; None if the file no
        longer holds them or cannot be read."""
        data = self.peek(rel)
        if data is None:
            try:
                data = read_file(os.path.join(self.root, rel), self.settings.max_file_size)
            except UnreadableFile:
                return None
        return outline(data)[0] if content_key(rel, data) == key else None

    def _facts(self, rel: str) -> ModuleFacts | None:
        return self._facts_store().facts(rel)

    def _same_facts(self, rel: str, then: str) -> bool:
        """Are the file's facts now those of its bytes of content key `then`? Their cache entries'
        bytes answer first, sparing the decoding of the stored facts and a comparison of every
        field (about 1.5 ms of a one-file run after a comment in a 1,000-line agent file)."""
        now = self._facts(rel)
        if now is None or self.cache is None:
            return False
        if self.cache.same_facts(then, self.key(rel)):  # type: ignore[arg-type]
            return True
        return self.cache.facts(rel, then) == now

    def preload(self, rels: Iterable[str]) -> None:
        """Facts for many files at once: from the cache, else parsed (in parallel when it pays)."""
        self._facts_store().preload(rels)

    def remembered(self, data: bytes, compute: Callable[[bytes], T]) -> T:
        """`compute(data)`, for a pure function of a file's bytes that costs far more than reading
        them (the digest of a vendored helper's code, which every run of a migrated project checks),
        kept between runs under the function's name and the bytes: in the cache (written at once:
        the run's own entries are already saved), or in a long-lived process' memory."""
        if self.warm is not None:
            memory, key = self.warm.remembered, (compute.__qualname__, data)
            if key not in memory:
                keep_last(memory, key, compute(data))
            return memory[key]
        if self.cache is None:
            return compute(data)
        key = content_key(compute.__qualname__, data)
        if (found := self.cache.remembered(key)) is not None:
            return found[0]
        value = compute(data)
        self.cache.remember(key, value)
        self.cache.save(prune=False)
        return value

    def release(self) -> None:
        """Drop the facts store and the workers: they call back into the project, a cycle that
        a long-lived caller which freezes what it keeps (`api.Session`) would never see freed."""
        self._store = None
        self._workers = None

    def _facts_store(self) -> FactsStore:
        if self._store is None:
            memory = self.warm.facts if self.warm else None
            functions = self.warm.functions if self.warm else None
            self._store = FactsStore(
                self.read,
                self.key,
                self.cache,
                self._pool(),
                self.errors,
                self.failed,
                self._parsed,
                memory,
                functions,
            )
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
        scopes = _cut_scopes(self.root, paths)
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
        self._statuses = files.statuses
        fingerprints = Fingerprints(self.settings, files) if self.cache else None
        fingerprint = fingerprints.of_settled(self.cache, self.key, self._keys) if fingerprints else None
        try:  # reusing a result may parse a few files too: the workers stop either way
            result = self._stored(files, fingerprints, fingerprint, inventory)
            analysed = result is None
            if analysed:
                result = self._analyze(files, fingerprints, scopes, whole, inventory, located)
        finally:
            if self._workers is not None:
                self._workers.close()
        if self.cache:
            if analysed and whole and fingerprint and not self.failed:
                self.cache.put_snapshot(fingerprint, result._asdict(), self._observed)
            # a reused result saves too: the content keys this run learned of files that have
            # settled since they were last recorded spare the next run reading them again
            self.cache.save(prune=analysed and whole)
        shown = [
            f
            for f in result.findings
            if in_scope(f.path, scopes) or any(in_scope(e.path, scopes) for e in f.evidence)
        ]
        findings = [f for f in shown if self.settings.selects(f.code)]
        return Report(
            root=self.root,
            findings=findings,
            errors=_with_limits_hit([e for e in result.errors if in_scope(e.path, scopes)], shown, findings),
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
            excluded=_excluded(files, scopes),
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
            unchanged = all(self.key(rel) == key for rel, key in stored["outside"].items())
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
            self._contents(files),
            files.sources,
            unusable={*files.configs, *(e.path for e in stored["errors"])},
            base_tokens=self._tokens,
            read=self.read,
            key=self.key,
            same_facts=self._same_facts,
        )
        if observed is None or self.failed:
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
        self.errors.update(files.errors)
        store = self._facts_store()
        names, paths = None, None
        if self.warm:  # what the last runs worked out of the same facts and listing
            if self.warm.paths is None or self.warm.paths[0] is not files:
                self.warm.paths = (files, {})
            names, paths = self.warm.names, self.warm.paths[1]
        index = Index(set(files.modules), store.facts, names, paths)
        bases = frozenset(settings.agent_bases)
        indexes = Indexes(
            self.root,
            settings.max_file_size,
            files,
            self.cache,
            self._pool(),
            self.read,
            self.key,
            self.errors,
            self.failed,
            self.warm,
            self.memory,
        )
        instances = indexes.instances(
            fingerprints.of(self.key, files.configs) if fingerprints else None, background=whole
        )
        # For the one-file runs to come, not this one: indexed by a worker while this process parses.
        indexed = indexes.index_imports(files.sources) if whole and not self.warm else lambda: None
        self._phase("parsing")

        def search(rels: Iterable[str], names: Collection[str]) -> list[str]:
            """The word index's answer when it has one (the files it vouches for are not read
            again), else the files searched, by the workers when they run."""
            return indexes.naming(names) if indexes.answers(names) else self.naming(rels, names)

        chosen = Targets(files.sources, files.statuses, self.names_a_base, search, indexes.naming, store)
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
            mentions = functools.partial(self.warm.mentions, read=self.read) if self.warm else None
            resolver = Resolver(
                hierarchy, settings, instances(), self.read, mentions, sites, inlined, store.edited
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
                read=self.read,
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
            self.errors.setdefault(rel, InputError(rel, message, "too_deep"))
        for rel, (name, line) in sorted(index.cut.items()):
            message = (
                f"`{name}` is re-exported through more than {LIMITS.import_depth} modules: it was not "
                "followed further (a self-call through it is not reported)"
            )
            self.errors.setdefault(rel, InputError(rel, message, "too_deep", line))
        if fingerprints and whole:
            parsed = store.keys()
            self._observed = observe(
                fingerprints.setup,
                self._contents(files),
                parsed,
                rounds,
                searched,
                resolver.posters,
                {rel: self._outline(rel, key) for rel, key in parsed.items()},
            )
        return Analysis(
            findings=sorted(set(findings), key=lambda f: f.sort_key),
            suppressed=suppressed,
            errors=[self.errors[rel] for rel in sorted(self.errors)],
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

    def _contents(self, files: FileSet) -> dict[str, str | None]:
        """The content key of each source and config file."""
        return {rel: self.key(rel) for rel in (*files.sources, *files.configs)}

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


def _with_limits_hit(
    errors: list[InputError], shown: list[Finding], selected: list[Finding]
) -> list[InputError]:
    """A call the analysis stopped following at one of its limits is never passed over in silence:
    when its finding (an SCA003, off by default) is not selected, an SCA900 entry at the call says
    the analysis stopped there."""
    kept = set(selected)
    hits = [f for f in shown if f.limit is not None and f not in kept]
    if not hits:
        return errors
    entries = {
        (f.path, f.line): InputError(
            f.path,
            f"the analysis stopped following this call at one of its limits ({f.limit}); it may be "
            f"a self-call: select {f.code} to see it",
            "too_deep",
            f.line,
            f.column,
        )
        for f in hits
    }
    return sorted([*errors, *entries.values()], key=lambda e: (e.path, e.line, e.column))


def _excluded(files: FileSet, scopes: tuple[str, ...]) -> tuple[str, ...]:
    """The scopes named on purpose that hold Python files, none of them analysed: each excluded
    by the settings or as test code (said, not passed over in silence)."""
    sources = set(files.sources)
    theirs = tuple(f"{folder}/" for folder in files.projects)  # a nested project's files are not ours
    found = []
    for scope in scopes:
        if not scope or scope in sources or f"{scope}/".startswith(theirs):
            continue
        if scope in files.modules or (
            not any(in_scope(rel, (scope,)) for rel in files.sources)
            and any(in_scope(rel, (scope,)) for rel in files.modules)
        ):
            found.append(scope)
    return tuple(found)
