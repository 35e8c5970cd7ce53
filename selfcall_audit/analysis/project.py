"""The analysis pipeline: discover → prefilter → facts → index → resolve → findings."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from ..ftypes import AgentInfo, Finding, InputError
from ..rules import code_selected
from ..workspace.cache import FactsCache, blake2b, code_version, content_key
from ..workspace.discovery import FileSet, UnreadableFile, discover, in_scope, read_file
from ..workspace.prefilter import import_lines, importers, mentions_any, word_matcher

TYPE_CHECKING = False  # typing is not imported at run time: it costs a one-file scan 3%
if TYPE_CHECKING:  # the analysis modules load only when a run analyses: not on a cache hit
    from concurrent.futures import Executor

    from ..workspace.listing import GitListing
    from ..workspace.reuse import Observed
    from .facts import ModuleFacts
    from .gym_config import AgentInstance, Node
    from .hierarchy import Hierarchy
    from .resolve import Resolver

_CONFIG_TOKENS = (b"responses_api_agents", b"config_paths")
_PARALLEL_MIN_FILES = 24
_MAX_SCOPED_FILES = 60

Progress = Callable[[str, int, int], None]


@dataclass
class Analysis:
    """What a run found before selection and scoping: the part a snapshot can keep."""

    findings: list[Finding]  # every rule, `noqa` already applied
    suppressed: int
    errors: dict[str, str]
    files_scanned: int
    agent_count: int
    agents: list[AgentInfo] | None  # only when the inventory was asked for


@dataclass
class Report:
    root: Path
    findings: list[Finding]
    errors: list[InputError]
    files_scanned: int
    files_parsed: int
    agent_count: int
    agents: list[AgentInfo]  # filled by `analyze(inventory=True)`
    seconds: float
    suppressed: int = 0
    baseline_stale: list[dict] = field(default_factory=list)
    projects: tuple[Path, ...] = ()  # roots of the nested projects in scope, analysed on their own


def _cut_scopes(root: Path, paths: Iterable[Path]) -> tuple[str, ...]:
    scopes = []
    for path in paths:
        # A link named on the command line that leads nowhere (broken, a loop) is its own scope:
        # the listed file it is, reported as unreadable.
        broken = os.path.islink(path) and not os.path.exists(path)
        real = (
            os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), path.name)
            if broken
            else path.resolve()
        )
        rel = os.path.relpath(real, root)
        scopes.append("" if rel == "." else rel.replace(os.sep, "/"))
    return tuple(scopes)


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """Collect garbage rarely while analysing. The facts are hundreds of thousands of small
    frozen nodes that live to the end and form no cycles; at CPython's default thresholds (a
    collection every 700 allocations, older generations re-scanned in turn) walking them again
    and again took a sixth of a cold scan of NeMo Gym."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


class Project:
    """One analysis of one project root; front ends ask it for findings and inventory."""

    def __init__(self, root: Path, settings: Settings, progress: Progress | None = None):
        self.root = root
        self.settings = settings
        self.progress = progress
        self.errors: dict[str, str] = {}
        self._bytes: dict[str, bytes] = {}
        self._facts_memo: dict[str, ModuleFacts | None] = {}
        self._keys: dict[str, str] = {}  # content keys of the files whose facts were asked for
        self._observed: Observed | None = None  # what a whole run saw, for `reuse`
        self._stats: dict[str, tuple[int, int]] = {}
        self.files_parsed = 0
        self.cache = FactsCache.open(root, settings.cache_dir) if settings.cache_dir else None
        self._pool: Executor | None = None
        self._pool_size = 0
        self._restore_sigterm: Callable[[], None] = lambda: None
        self._setup_of: tuple[FileSet, str] | None = None

    # input -------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes | None:
        """The file's bytes, read once; None, with an SCA900 entry saying why, when they cannot be had."""
        if rel in self._bytes:
            return self._bytes[rel]
        try:
            data = read_file(self.root / rel, self.settings.max_file_size)
        except UnreadableFile as exc:
            self.errors[rel] = str(exc)
            return None
        self._bytes[rel] = data
        return data

    def _facts(self, rel: str) -> ModuleFacts | None:
        if rel not in self._facts_memo:
            self.preload([rel])
        return self._facts_memo.get(rel)

    def preload(self, rels: Iterable[str]) -> None:
        """Facts for many files at once: from the cache, else parsed (in parallel when it pays)."""
        misses: list[tuple[str, bytes, str]] = []
        for rel in rels:
            if rel in self._facts_memo:
                continue
            data = self.read(rel)
            if data is None:
                self._facts_memo[rel] = None
                continue
            key = self._keys[rel] = content_key(rel, data)
            cached = self.cache.facts(rel, key) if self.cache else None
            if cached is not None:
                self._facts_memo[rel] = cached
            else:
                misses.append((rel, data, key))
        keys = {rel: key for rel, _, key in misses}
        for done, (rel, result) in enumerate(self._extract([(r, d) for r, d, _ in misses])):
            if self.progress:
                self.progress(rel, done + 1, len(misses))
            self.files_parsed += 1
            if isinstance(result, str):
                self.errors[rel] = result
                self._facts_memo[rel] = None
            else:
                self._facts_memo[rel] = result
                if self.cache:
                    self.cache.put_facts(rel, keys[rel], result)

    def _workers(self, batch: int) -> Executor | None:
        """The worker processes, started for the first batch large enough to repay them, and only
        where this process may fork: not in flake8's daemonic workers, and not beside other
        threads (a test suite calling `assert_no_self_calls`), which a fork can deadlock. Once
        started, every batch of two or more files is shared out."""
        if self._pool is not None:
            return self._pool if batch >= 2 else None
        workers = self.settings.jobs or os.cpu_count() or 1
        if workers < 2 or batch < _PARALLEL_MIN_FILES:
            return None
        import multiprocessing  # only now: it costs a warm run more than the rest of its imports
        import threading
        from concurrent.futures import ProcessPoolExecutor

        from ..workspace.workers import stop_workers_on_sigterm, worker_started

        if (
            multiprocessing.current_process().daemon
            or "fork" not in multiprocessing.get_all_start_methods()
            or threading.active_count() > 1
        ):
            return None
        self._pool_size = min(workers, batch // (_PARALLEL_MIN_FILES // 2))
        self._pool = ProcessPoolExecutor(
            self._pool_size,
            mp_context=multiprocessing.get_context("fork"),
            initializer=worker_started,
            initargs=(os.getpid(),),
        )
        self._restore_sigterm = stop_workers_on_sigterm()
        return self._pool

    def _extract(self, items: list[tuple[str, bytes]]) -> Iterable[tuple[str, ModuleFacts | str]]:
        pool = self._workers(len(items))
        if pool is None:
            return map(_extract_job, items)
        chunks = max(1, len(items) // (self._pool_size * 4))
        return list(pool.map(_extract_job, items, chunksize=chunks))

    # pipeline ----------------------------------------------------------------------------
    @_few_collections()
    def analyze(
        self, paths: Iterable[Path] = (), inventory: bool = False, early: GitListing | None = None
    ) -> Report:
        """Findings for `paths` (default: the whole project); `inventory` also lists YAML instances
        per agent, which needs every entrypoint module; `early`: git's listing, started before."""
        started = time.perf_counter()
        scopes = _cut_scopes(self.root, paths)
        whole = not scopes or "" in scopes
        files = discover(
            self.root,
            self.settings.exclude,
            self.settings.include_tests,
            self.settings.config_globs,
            nested=self.settings.nested_projects,
            early=early,
        )
        self._stats = files.stats
        fingerprint = self._fingerprint(files) if self.cache else None
        try:  # reusing a result may parse a few files too: the workers stop either way
            result = self._stored(files, fingerprint, inventory)
            analysed = result is None
            if analysed:
                result = self._analyze(files, scopes, whole, inventory)
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
                self._restore_sigterm()
        if analysed and self.cache:
            if whole and fingerprint:
                self.cache.put_snapshot(fingerprint, vars(result), self._observed)
            self.cache.save(prune=whole)
        findings = [
            f
            for f in result.findings
            if _selected(f.code, self.settings)
            and (in_scope(f.path, scopes) or any(in_scope(e.path, scopes) for e in f.evidence))
        ]
        if _selected("SCA004", self.settings):  # whatever the scope: the hook sees a stale copy too
            from ..migrate.vendor import stale_copies

            findings = sorted(
                findings + stale_copies(self.root, files.sources, self.settings.helper),
                key=lambda f: f.sort_key,
            )
        return Report(
            root=self.root,
            findings=findings,
            errors=[InputError(p, m) for p, m in sorted(result.errors.items()) if in_scope(p, scopes)],
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
        )

    def _stored(self, files: FileSet, fingerprint: str | None, inventory: bool) -> Analysis | None:
        """The last whole-project result, when it was computed for these very files or still
        holds for them as they are now (then kept again under their new fingerprint)."""
        stored = self.cache.snapshot(None) if self.cache and fingerprint else None
        if stored is None or (stored["agents"] is None and inventory):
            return None
        then = stored.pop("fingerprint")
        if then == fingerprint:
            return Analysis(**stored)
        from ..workspace.reuse import still_holds

        observed = still_holds(
            self.cache.observed(then),
            self._setup(files),
            self._stats,
            files.sources,
            unusable={*files.configs, *stored["errors"]},
            base_tokens=_base_tokens(self.settings),
            read=self.read,
            facts_now=self._facts,
            facts_then=self.cache.facts,
        )
        if observed is None:
            return None
        result = Analysis(**stored)
        self.cache.put_snapshot(fingerprint, vars(result), observed)
        self.cache.save(prune=False)
        return result

    def _setup(self, files: FileSet) -> str:
        """What a result depends on besides the files' contents: tool, settings, the file list."""
        if self._setup_of is None or self._setup_of[0] is not files:
            described = (code_version(), _analysis_settings(self.settings), files.sources, files.configs)
            digest = blake2b(repr(described).encode("utf-8", "surrogateescape"), digest_size=16)
            for rel in sorted(files.modules):
                digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            self._setup_of = (files, digest.hexdigest())
        return self._setup_of[1]

    def _fingerprint(self, files: FileSet, only: Iterable[str] | None = None) -> str | None:
        """The setup and each file's size and modification time (those of `only`, if given)."""
        digest = blake2b(self._setup(files).encode(), digest_size=16)
        for rel in sorted(files.modules | set(files.configs)) if only is None else only:
            if rel not in self._stats:
                return None
            size, mtime = self._stats[rel]
            digest.update(f"{rel}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def _instances(self, files: FileSet, background: bool) -> Callable[[], list[AgentInstance]]:
        """Server instances of every YAML config, reused while no config file changes; worked out
        by a worker process while this one parses, when `background` and the workers pay."""
        key = self._fingerprint(files, files.configs) if self.cache else None
        stored = self.cache.instances(key) if self.cache and key else None
        if stored is not None:
            self.errors.update(stored[1])
            return lambda: stored[0]
        job = (self.root, files.configs, self.settings.max_file_size)
        pool = self._workers(len(files.sources)) if background else None
        pending = pool.submit(_instances_job, *job) if pool else None

        def result() -> list[AgentInstance]:
            instances, errors = pending.result() if pending else _instances_job(*job)
            self.errors.update(errors)
            if self.cache and key:
                self.cache.put_instances(key, instances, errors)
            return instances

        return functools.cache(result)

    def _import_lines(self, sources: Iterable[str]) -> list[tuple[str, bytes | None]]:
        """Each file's import lines, from a stat-keyed index so unchanged files are not read."""
        sources = tuple(sources)
        if self.cache:
            self._index_imports(sources)()
        index = self.cache.imports() if self.cache else {}
        return [
            (rel, index[rel][2].encode("utf-8", "surrogateescape"))
            if rel in index and (index[rel][0], index[rel][1]) == self._stats.get(rel)
            else (rel, import_lines(self.read(rel)))
            for rel in sources
        ]

    def _index_imports(self, sources: tuple[str, ...]) -> Callable[[], None]:
        """Bring the import-line index up to date for the one-file runs to come, in a worker while
        this process parses, when workers run; call the result to store what was found."""
        index = self.cache.imports()
        stale = [
            (rel, stat)
            for rel in sources
            if (stat := self._stats.get(rel)) is not None
            and ((entry := index.get(rel)) is None or (entry[0], entry[1]) != stat)
        ]
        rels = tuple(rel for rel, _ in stale)
        pool = self._workers(len(stale))
        pending = (
            pool.submit(_import_lines_job, self.root, rels, self.settings.max_file_size) if pool else None
        )

        def store() -> None:
            found = pending.result() if pending else [import_lines(self.read(rel)) for rel in rels]
            for (rel, stat), lines in zip(stale, found):
                self.cache.put_import_lines(rel, stat, lines.decode("utf-8", "surrogateescape"))

        return store

    def _analyze(self, files: FileSet, scopes: tuple[str, ...], whole: bool, inventory: bool) -> Analysis:
        from .hierarchy import Hierarchy
        from .index import ClassRef, Index
        from .resolve import Resolver

        settings = self.settings
        self.errors.update(files.errors)
        index = Index(set(files.modules), self._facts)
        bases = frozenset(settings.agent_bases)
        instances = self._instances(files, background=whole)
        targets = None
        if not whole:
            hierarchy = Hierarchy(index, bases, self._subclass_finder(files.sources))
            resolver = Resolver(hierarchy, settings, instances(), self.read)
            targets = self._scoped_modules(files.sources, scopes, instances(), resolver)
        if targets is None:
            hierarchy = Hierarchy(index, bases)
            indexed = self._index_imports(files.sources) if self.cache else None
            targets, rounds, searched = self._agent_modules(files.sources, hierarchy)
            if indexed:
                indexed()
            # Files named one by one (pre-commit's changed files) are always read: their errors show.
            self.preload([rel for rel in files.sources if rel in scopes])
            resolver = Resolver(hierarchy, settings, instances(), read=self.read)
        findings: list[Finding] = []
        suppressed = 0
        source_set = set(files.sources)
        for rel in dict.fromkeys(targets):
            module = index.module(rel)
            if module is None or rel not in source_set:
                continue
            for finding in resolver.findings_in(rel):
                if _noqa(module, finding):
                    suppressed += 1
                else:
                    findings.append(finding)
        if self.cache and whole:
            from ..workspace.reuse import observe

            self._observed = observe(
                self._setup(files),
                self._stats,
                {rel: self._keys[rel] for rel, facts in self._facts_memo.items() if facts is not None},
                rounds,
                searched,
                resolver.posters,
            )
        return Analysis(
            findings=sorted(set(findings), key=lambda f: f.sort_key),
            suppressed=suppressed,
            errors=dict(self.errors),
            files_scanned=len(files.sources) + len(files.configs),
            agent_count=sum(
                1
                for rel in dict.fromkeys(targets)
                if (module := index.module(rel)) is not None
                for klass in module.classes
                if hierarchy.is_agent_class(ClassRef(rel, klass.name))
            ),
            agents=self._inventory(hierarchy, resolver, instances()) if inventory else None,
        )

    def _scoped_modules(
        self,
        sources: tuple[str, ...],
        scopes: tuple[str, ...],
        instances: list[AgentInstance],
        resolver: Resolver,
    ) -> list[str] | None:
        """What a whole run would report on for `scopes`: the files in scope, the modules whose
        classes run in the instances that YAML files in scope configure, and the modules importing
        (transitively) a module in scope. None when that grows so large that the whole-project
        prefilter is cheaper."""
        targets = [rel for rel in sources if in_scope(rel, scopes)]
        for instance in instances:
            if in_scope(instance.where.path, scopes):
                for served in resolver.served_classes(instance):
                    targets += [owner.path for owner in resolver.hierarchy.mro(served)]
        listed = set(sources)
        targets = [rel for rel in dict.fromkeys(targets) if rel in listed]
        seen = set(targets)
        frontier = [rel for rel in targets if rel.endswith(".py")]
        while frontier:
            frontier = importers(frontier, self._import_lines(rel for rel in sources if rel not in seen))
            seen.update(frontier)
            targets += frontier
            if len(targets) > _MAX_SCOPED_FILES:
                return None
        self.preload(targets)
        return targets

    def _agent_modules(
        self, sources: tuple[str, ...], hierarchy: Hierarchy
    ) -> tuple[list[str], list[list[str]], list[set[str]]]:
        """Prefilter to a fixpoint: files naming an agent base, then files naming agents found so
        far. The modules to report on, the files each round parsed (the first: those naming a
        base) and the agent names each later round searched for."""
        from .index import ClassRef

        index = hierarchy.index
        pending = [rel for rel in sources if mentions_any(self.read(rel), _base_tokens(self.settings))]
        rounds: list[list[str]] = []
        searched: list[set[str]] = []
        known: set[str] = set()
        parsed: list[str] = []
        while pending:
            self.preload(pending)
            rounds.append(pending)
            parsed += pending
            names = {
                ref.name
                for rel in pending
                if (module := index.module(rel)) is not None
                for klass in module.classes
                if hierarchy.is_agent(ref := ClassRef(rel, klass.name))
            } - known
            known |= names
            searched.append(names)
            done = set(parsed)
            named = word_matcher(names)
            pending = [rel for rel in sources if rel not in done and named(self._bytes.get(rel))]
        # Bases and mixins the agents pulled in on demand can hold self-calls of their own.
        return parsed + [m.path for m in index.parsed() if m.path not in set(parsed)], rounds, searched

    def _subclass_finder(self, sources: tuple[str, ...]) -> Callable[[str], list[str]]:
        """The files that name a class: subclasses of it may be defined there."""

        def find(name: str) -> list[str]:
            named = word_matcher([name])
            found = [rel for rel in sources if named(self.read(rel))]
            self.preload(found)
            return found

        return find

    def _inventory(self, hierarchy: Hierarchy, resolver: Resolver, instances: list) -> list[AgentInfo]:
        from .index import ClassRef

        index = hierarchy.index
        agents = []
        for module in index.parsed():
            for klass in module.classes:
                ref = ClassRef(module.path, klass.name)
                if not hierarchy.is_agent_class(ref):
                    continue
                bases = tuple(b if isinstance(b, str) else index.qualname(b) for b in hierarchy.bases(ref))
                names = tuple(sorted({i.name for i in instances if ref in resolver.served_classes(i)}))
                agents.append(AgentInfo(klass.name, module.path, klass.line, bases, names))
        return sorted(agents, key=lambda a: (a.path, a.line))


def _analysis_settings(settings: Settings) -> tuple:
    """The settings a result depends on (not output, selection or speed settings)."""
    return (
        settings.agent_bases,
        settings.route,
        settings.own_routes,
        settings.route_wrappers,
        settings.config_globs,
        settings.exclude,
        settings.include_tests,
        settings.max_file_size,
    )


def _base_tokens(settings: Settings) -> tuple[bytes, ...]:
    """A file that names no agent base class can only matter through names found later."""
    return tuple({base.rsplit(".", 1)[-1].encode() for base in settings.agent_bases})


def _extract_job(item: tuple[str, bytes]) -> tuple[str, ModuleFacts | str]:
    from .facts import FactsError, extract

    rel, data = item
    try:
        return rel, extract(rel, data)
    except FactsError as exc:
        return rel, str(exc)


def _import_lines_job(root: Path, rels: tuple[str, ...], max_size: int) -> list[bytes]:
    found = []
    for rel in rels:
        try:
            found.append(import_lines(read_file(root / rel, max_size)))
        except UnreadableFile:
            found.append(b"")
    return found


def _instances_job(root: Path, configs: tuple[str, ...], max_size: int) -> tuple[list[AgentInstance], dict]:
    """The instances the configs define, and the files that could not be read or parsed."""
    from .gym_config import ConfigSet, parse_yaml

    errors: dict[str, str] = {}

    @functools.cache
    def read(rel: str) -> bytes | None:
        try:
            return read_file(root / rel, max_size)
        except UnreadableFile as exc:
            errors[rel] = str(exc)
            return None

    def parse(rel: str) -> list[Node]:
        data = read(rel)
        return [] if data is None else parse_yaml(rel, data)

    config_set = ConfigSet(parse, lambda rel: (root / rel).exists())
    instances = config_set.instances(tuple(rel for rel in configs if mentions_any(read(rel), _CONFIG_TOKENS)))
    return instances, {**errors, **config_set.errors}


def _selected(code: str, settings: Settings) -> bool:
    if settings.strict and code == "SCA003" and not any(code.startswith(i) for i in settings.ignore):
        return True
    return code_selected(code, settings.select, settings.ignore)


def _noqa(module: ModuleFacts, finding: Finding) -> bool:
    for line, codes in module.noqa:
        if finding.line <= line <= finding.end_line and (codes is None or finding.code.startswith(codes)):
            return True
    return False
