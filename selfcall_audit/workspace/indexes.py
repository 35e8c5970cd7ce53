"""What a run reads of many files, kept in the cache so that unchanged files are not read again:
the server instances of the YAML configs, and each source file's import lines. Worked out by a
worker process while this one parses or analyses, when workers run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path

from .cache import FactsCache
from .discovery import FileSet
from .jobs import import_lines_of, instances_of
from .prefilter import import_lines
from .workers import Workers

TYPE_CHECKING = False  # typing is not imported at run time: it costs a one-file scan 3%
if TYPE_CHECKING:
    from ..analysis.gym_config import AgentInstance


class Indexes:
    """The instances and the import lines of one listing of the project's files."""

    def __init__(
        self,
        root: Path,
        max_size: int,
        files: FileSet,
        cache: FactsCache | None,
        workers: Workers,
        read: Callable[[str], bytes | None],
        errors: dict[str, str],
    ):
        self.root = root
        self.max_size = max_size
        self.files = files
        self.cache = cache
        self.workers = workers
        self.read = read
        self.errors = errors

    def instances(self, key: str | None, background: bool) -> Callable[[], list[AgentInstance]]:
        """Server instances of every YAML config, reused while the configs' fingerprint `key`
        stays the same; worked out in a worker when `background` and the workers pay."""
        stored = self.cache.instances(key) if self.cache and key else None
        if stored is not None:
            self.errors.update(stored[1])
            return lambda: stored[0]
        job = (self.root, self.files.configs, self.max_size)
        pending = self.workers.submit(len(self.files.sources) if background else 0, instances_of, *job)

        def result() -> list[AgentInstance]:
            instances, errors = pending()
            self.errors.update(errors)
            if self.cache and key:
                self.cache.put_instances(key, instances, errors)
            return instances

        return functools.cache(result)

    def import_lines(self, sources: Iterable[str]) -> list[tuple[str, bytes | None]]:
        """Each file's import lines, from a stat-keyed index so unchanged files are not read."""
        sources = tuple(sources)
        self.index_imports(sources)()
        index = self.cache.imports() if self.cache else {}
        stats = self.files.stats
        return [
            (rel, index[rel][2].encode("utf-8", "surrogateescape"))
            if rel in index and (index[rel][0], index[rel][1]) == stats.get(rel)
            else (rel, import_lines(self.read(rel)))
            for rel in sources
        ]

    def index_imports(self, sources: tuple[str, ...]) -> Callable[[], None]:
        """Bring the import-line index up to date for the one-file runs to come, in a worker while
        this process analyses, when workers run; call the result to store what was found."""
        cache = self.cache
        if cache is None:
            return lambda: None
        index = cache.imports()
        stats = self.files.stats
        stale = [
            (rel, stat)
            for rel in sources
            if (stat := stats.get(rel)) is not None
            and ((entry := index.get(rel)) is None or (entry[0], entry[1]) != stat)
        ]
        rels = tuple(rel for rel, _ in stale)
        pool = self.workers.for_batch(len(stale))
        pending = pool.submit(import_lines_of, self.root, rels, self.max_size) if pool else None

        def store() -> None:
            found = pending.result() if pending else [import_lines(self.read(rel)) for rel in rels]
            for (rel, stat), lines in zip(stale, found):
                cache.put_import_lines(rel, stat, lines.decode("utf-8", "surrogateescape"))

        return store
