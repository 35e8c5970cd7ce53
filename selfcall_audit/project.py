"""The analysis pipeline: discover → prefilter → facts → index → resolve → findings."""

from __future__ import annotations

import multiprocessing
import os
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .cache import FactsCache, content_key
from .config import Settings
from .discovery import discover, in_scope
from .facts import FactsError, ModuleFacts, extract
from .findings import Finding, InputError, code_selected
from .gym_config import ConfigSet, Node, parse_yaml
from .index import ClassRef, Index
from .resolve import Resolver

_CONFIG_TOKENS = (b"responses_api_agents", b"config_paths")
_PARALLEL_MIN_FILES = 24

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class AgentInfo:
    name: str
    path: str
    line: int
    bases: tuple[str, ...]
    instances: tuple[str, ...]


@dataclass
class Report:
    root: Path
    findings: list[Finding]
    errors: list[InputError]
    files_scanned: int
    files_parsed: int
    agents: list[AgentInfo]
    seconds: float
    suppressed: int = 0
    baseline_stale: list[dict] = field(default_factory=list)


def _cut_scopes(root: Path, paths: Iterable[Path]) -> tuple[str, ...]:
    scopes = []
    for path in paths:
        rel = os.path.relpath(path.resolve(), root)
        scopes.append("" if rel == "." else rel.replace(os.sep, "/"))
    return tuple(scopes)


class Project:
    """One analysis of one project root; front ends ask it for findings and inventory."""

    def __init__(self, root: Path, settings: Settings, progress: Progress | None = None):
        self.root = root
        self.settings = settings
        self.progress = progress
        self.errors: dict[str, str] = {}
        self._bytes: dict[str, bytes] = {}
        self._facts_memo: dict[str, ModuleFacts | None] = {}
        self.files_parsed = 0
        self.cache = FactsCache(root / settings.cache_dir) if settings.cache_dir else None

    # input -------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes | None:
        if rel in self._bytes:
            return self._bytes[rel]
        full = self.root / rel
        try:
            size = full.stat().st_size
            if size > self.settings.max_file_size:
                self.errors[rel] = (
                    f"skipped: {size:,} bytes is over the max-file-size limit of {self.settings.max_file_size:,}"
                )
                return None
            data = full.read_bytes()
        except FileNotFoundError:
            self.errors[rel] = "file vanished during the scan"
            return None
        except IsADirectoryError:
            return None
        except OSError as exc:
            self.errors[rel] = f"cannot read: {exc.strerror or exc}"
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
            key = content_key(data)
            cached = self.cache.facts(rel, key) if self.cache else None
            if cached is not None:
                self._facts_memo[rel] = cached
            else:
                misses.append((rel, data, key))
        keys = {rel: key for rel, _, key in misses}
        for done, (rel, result) in enumerate(_extract_all([(r, d) for r, d, _ in misses], self.settings.jobs)):
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

    def _parse_yaml(self, rel: str) -> list[Node]:
        data = self.read(rel)
        if data is None:
            return []
        key = content_key(data)
        cached = self.cache.yaml(rel, key) if self.cache else None
        if cached is None:
            cached = parse_yaml(rel, data)
            if self.cache:
                self.cache.put_yaml(rel, key, cached)
        return cached

    # pipeline ----------------------------------------------------------------------------
    def analyze(self, paths: Iterable[Path] = ()) -> Report:
        started = time.perf_counter()
        settings = self.settings
        scopes = _cut_scopes(self.root, paths)
        whole = not scopes or "" in scopes
        files = discover(self.root, settings.exclude, settings.include_tests, settings.config_globs)
        index = Index(set(files.modules), self._facts)
        index.agent_bases = frozenset(settings.agent_bases)

        configs = ConfigSet(self._parse_yaml, lambda rel: (self.root / rel).exists())
        instances = configs.instances(
            tuple(rel for rel in files.configs if _mentions(self.read(rel), _CONFIG_TOKENS))
        )
        self.errors.update(configs.errors)

        if whole:
            targets = self._agent_modules(files.sources, index)
        else:
            # Only what was asked about, plus the agents that YAML files in scope configure.
            targets = [rel for rel in files.sources if in_scope(rel, scopes)]
            targets += [i.entrypoint for i in instances if i.entrypoint and in_scope(i.where.path, scopes)]
            self.preload(targets)
        resolver = Resolver(
            index,
            settings,
            instances,
            find_subclasses=self._subclass_finder(files.sources),
            mentions=lambda rel, names: bool(_mentioning(names, [(rel, self.read(rel))])),
        )

        findings: list[Finding] = []
        suppressed = 0
        source_set = set(files.sources)
        for rel in dict.fromkeys(targets):
            module = index.module(rel)
            if module is None or rel not in source_set:
                continue
            for finding in resolver.findings_in(rel):
                if not _selected(finding.code, settings):
                    continue
                if not (in_scope(finding.path, scopes) or any(in_scope(e.path, scopes) for e in finding.evidence)):
                    continue
                if _noqa(module, finding):
                    suppressed += 1
                    continue
                findings.append(finding)
        if self.cache:
            self.cache.save()
        errors = [InputError(path, message) for path, message in sorted(self.errors.items()) if in_scope(path, scopes)]
        return Report(
            root=self.root,
            findings=sorted(set(findings), key=lambda f: f.sort_key),
            errors=errors,
            files_scanned=len(files.sources) + len(files.configs),
            files_parsed=self.files_parsed,
            agents=self._inventory(index, resolver, instances),
            seconds=time.perf_counter() - started,
            suppressed=suppressed,
        )

    def _agent_modules(self, sources: tuple[str, ...], index: Index) -> list[str]:
        """Prefilter to a fixpoint: files naming an agent base, then files naming agents found so far."""
        pending = [rel for rel in sources if _mentions(self.read(rel), _base_tokens(self.settings))]
        known: set[str] = set()
        parsed: list[str] = []
        while pending:
            self.preload(pending)
            parsed += pending
            names = {
                ref.name
                for rel in pending
                if (module := index.module(rel)) is not None
                for klass in module.classes
                if index.is_agent(ref := ClassRef(rel, klass.name))
            } - known
            known |= names
            done = set(parsed)
            pending = _mentioning(names, ((rel, self._bytes.get(rel)) for rel in sources if rel not in done))
        return parsed

    def _subclass_finder(self, sources: tuple[str, ...]) -> Callable[[str], None]:
        """Parse the files that name a class, so that subclasses defined there become known."""

        def find(name: str) -> None:
            self.preload(_mentioning({name}, ((rel, self.read(rel)) for rel in sources if rel not in self._facts_memo)))

        return find

    def _inventory(self, index: Index, resolver: Resolver, instances: list) -> list[AgentInfo]:
        agents = []
        for module in index.parsed():
            for klass in module.classes:
                ref = ClassRef(module.path, klass.name)
                if not index.is_agent(ref) or index.qualname(ref) in index.agent_bases:
                    continue
                bases = tuple(
                    b if isinstance(b, str) else index.qualname(b) for b in index.bases(ref)
                )
                names = tuple(
                    sorted({i.name for i in instances if ref in resolver.served_classes(i)})
                )
                agents.append(AgentInfo(klass.name, module.path, klass.line, bases, names))
        return sorted(agents, key=lambda a: (a.path, a.line))


def _base_tokens(settings: Settings) -> tuple[bytes, ...]:
    """A file that names no agent base class can only matter through names found later."""
    return tuple({base.rsplit(".", 1)[-1].encode() for base in settings.agent_bases})


def _mentions(data: bytes | None, tokens: tuple[bytes, ...]) -> bool:
    return data is not None and any(token in data for token in tokens)


def _mentioning(names: set[str], files: Iterable[tuple[str, bytes | None]]) -> list[str]:
    """Files naming one of `names` as a whole word (a plain search first: word checks are slow)."""
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names))
    anywhere, as_word = re.compile(alternatives), re.compile(rb"\b(?:" + alternatives + rb")\b")
    return [rel for rel, data in files if data is not None and anywhere.search(data) and as_word.search(data)]


def _extract_job(item: tuple[str, bytes]) -> tuple[str, ModuleFacts | str]:
    rel, data = item
    try:
        return rel, extract(rel, data)
    except FactsError as exc:
        return rel, str(exc)


def _extract_all(items: list[tuple[str, bytes]], jobs: int) -> Iterable[tuple[str, ModuleFacts | str]]:
    """Parse in worker processes when there are enough files to repay starting them."""
    workers = jobs or os.cpu_count() or 1
    if workers < 2 or len(items) < _PARALLEL_MIN_FILES or "fork" not in multiprocessing.get_all_start_methods():
        return map(_extract_job, items)
    workers = min(workers, len(items) // (_PARALLEL_MIN_FILES // 2))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    with pool:
        return list(pool.map(_extract_job, items, chunksize=max(1, len(items) // (workers * 4))))


def _selected(code: str, settings: Settings) -> bool:
    if settings.strict and code == "SCA003" and not any(code.startswith(i) for i in settings.ignore):
        return True
    return code_selected(code, settings.select, settings.ignore)


def _noqa(module: ModuleFacts, finding: Finding) -> bool:
    for line, codes in module.noqa:
        if finding.line <= line <= finding.end_line and (codes is None or finding.code.startswith(codes)):
            return True
    return False
