"""The analysis pipeline: discover → prefilter → facts → index → resolve → findings."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .config import Settings
from .discovery import discover, in_scope, list_project_files
from .facts import FactsError, ModuleFacts, extract
from .findings import Finding, InputError, code_selected
from .gym_config import ConfigSet
from .index import ClassRef, Index
from .resolve import Resolver

# Tokens without which a file can neither make a server-client call nor define an agent class.
_SEED_TOKENS = (b"server_client", b"ResponsesAPIAgent", b"server_name")
_CONFIG_TOKENS = (b"responses_api_agents", b"config_paths")

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
        self.files_parsed = 0

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
        data = self.read(rel)
        if data is None:
            return None
        self.files_parsed += 1
        try:
            return extract(rel, data)
        except FactsError as exc:
            self.errors[rel] = str(exc)
            return None

    # pipeline ----------------------------------------------------------------------------
    def analyze(self, paths: Iterable[Path] = ()) -> Report:
        started = time.perf_counter()
        settings = self.settings
        scopes = _cut_scopes(self.root, paths)
        files = discover(self.root, settings.exclude, settings.include_tests, settings.config_globs)
        all_py = {f for f in list_project_files(self.root) if f.endswith(".py")} | set(files.sources)
        index = Index(all_py, self._facts)
        index.agent_bases = frozenset(settings.agent_bases)

        seed = re.compile(b"|".join(re.escape(t) for t in _SEED_TOKENS + _base_tokens(settings)))
        pending = [rel for rel in files.sources if (data := self.read(rel)) is not None and seed.search(data)]
        known_agents: set[str] = set()
        parsed: set[str] = set()
        while pending:
            for number, rel in enumerate(pending):
                if self.progress:
                    self.progress(rel, number, len(pending))
                index.module(rel)
                parsed.add(rel)
            names = {
                ref.name
                for module in index.parsed()
                for klass in module.classes
                if index.is_agent(ref := ClassRef(module.path, klass.name))
            } - known_agents
            known_agents |= names
            if not names:
                break
            mention = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\b")
            pending = [
                rel
                for rel in files.sources
                if rel not in parsed and (data := self._bytes.get(rel)) is not None and mention.search(data)
            ]

        config_token = re.compile(b"|".join(_CONFIG_TOKENS))
        config_paths = tuple(
            rel for rel in files.configs if (data := self.read(rel)) is not None and config_token.search(data)
        )
        configs = ConfigSet(lambda rel: self.read(rel) or b"", lambda rel: (self.root / rel).exists())
        instances = configs.instances(config_paths)
        self.errors.update(configs.errors)

        resolver = Resolver(index, settings, instances)
        findings: list[Finding] = []
        suppressed = 0
        source_set = set(files.sources)
        for module in list(index.parsed()):
            if module.path not in source_set:
                continue
            for finding in resolver.findings_in(module.path):
                if not _selected(finding.code, settings):
                    continue
                if not (in_scope(finding.path, scopes) or any(in_scope(e.path, scopes) for e in finding.evidence)):
                    continue
                if _noqa(module, finding):
                    suppressed += 1
                    continue
                findings.append(finding)
        findings = sorted(set(findings), key=lambda f: f.sort_key)

        agents = self._inventory(index, resolver, instances)
        errors = [InputError(path, message) for path, message in sorted(self.errors.items()) if in_scope(path, scopes)]
        return Report(
            root=self.root,
            findings=findings,
            errors=errors,
            files_scanned=len(files.sources) + len(files.configs),
            files_parsed=self.files_parsed,
            agents=agents,
            seconds=time.perf_counter() - started,
            suppressed=suppressed,
        )

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
    return tuple(base.rsplit(".", 1)[-1].encode() for base in settings.agent_bases)


def _selected(code: str, settings: Settings) -> bool:
    if settings.strict and code == "SCA003" and not any(code.startswith(i) for i in settings.ignore):
        return True
    return code_selected(code, settings.select, settings.ignore)


def _noqa(module: ModuleFacts, finding: Finding) -> bool:
    for line, codes in module.noqa:
        if finding.line <= line <= finding.end_line and (codes is None or finding.code.startswith(codes)):
            return True
    return False
