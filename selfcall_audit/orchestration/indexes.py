"""What a run finds in many files, kept in the cache under each file's content key so that unchanged
files are not searched again: the server instances of the YAML configs, each source file's import
lines (both worked out by a worker process while this one parses or analyses, when workers run),
and which files name the classes that one-file runs searched for."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

from ..workspace.discovery import FileSet
from ..workspace.prefilter import as_words, import_lines, names_found, word_matcher
from ..workspace.workers import Workers
from .inputs import Inputs
from .jobs import import_lines_of, instances_of

if TYPE_CHECKING:
    from ..analysis.gym_config import AgentInstance

# names the word index answers for (a whole run's agent names, then those one-file runs asked);
# one more starts it again
_MAX_NAMES = 1024


class Indexes:
    """The instances, the import lines and the word index of one listing of the project's files."""

    def __init__(self, inputs: Inputs, files: FileSet, workers: Workers):
        self.inputs = inputs
        self.files = files
        self.workers = workers
        self._lines: dict[str, bytes] = {}

    def instances(self, key: str | None, background: bool) -> Callable[[], list[AgentInstance]]:
        """Server instances of every YAML config, reused while the configs' fingerprint `key`
        stays the same (not when a file could not be read or parsed: it is tried again next
        time); worked out in a worker when `background` and the workers pay."""
        stored = self.inputs.cache.instances(key) if self.inputs.cache and key else None
        if self.inputs.warm is not None:
            stored = self.inputs.warm.instances
        if stored is not None:
            self.inputs.errors.update(stored[1])
            return lambda: stored[0]
        job = (self.inputs.root, self.files.configs, self.inputs.settings.max_file_size)
        pending = self.workers.submit(len(self.files.sources) if background else 0, instances_of, *job)

        def result() -> list[AgentInstance]:
            instances, errors, failed = pending()
            self.inputs.errors.update(errors)
            self.inputs.failed.update(failed)
            if self.inputs.cache and key and not failed:
                self.inputs.cache.put_instances(key, instances, errors)
            if self.inputs.warm is not None and not failed:
                self.inputs.warm.instances = (instances, errors)
            return instances

        return functools.cache(result)

    def import_lines(self, sources: Iterable[str]) -> list[tuple[str, bytes]]:
        """Each file's import lines, from an index by content key so unchanged files are not
        searched again; asked once per step of a walk up the importers, each file's are looked up
        once per run."""
        sources = tuple(sources)
        if self.inputs.warm is not None:
            return [(rel, self.inputs.warm.import_lines(rel, self.inputs.read(rel))) for rel in sources]
        lines = self._lines
        if missing := tuple(rel for rel in sources if rel not in lines):
            self.index_imports(missing)()
            index = self.inputs.cache.imports() if self.inputs.cache else {}
            for rel in missing:
                entry = index.get(rel)
                kept = self.inputs.cache is not None and _current(entry, self.inputs.key(rel))
                lines[rel] = (
                    entry[1].encode("utf-8", "surrogateescape")
                    if kept
                    else import_lines(self.inputs.read(rel))
                )
        return [(rel, lines[rel]) for rel in sources]

    def index_imports(self, sources: tuple[str, ...]) -> Callable[[], None]:
        """Bring the import-line index up to date for the one-file runs to come, in a worker while
        this process analyses, when workers run; call the result to store what was found."""
        cache = self.inputs.cache
        if cache is None:
            return lambda: None
        index = cache.imports()
        stale = [
            (rel, key)
            for rel in sources
            if (key := self.inputs.key(rel)) is not None and not _current(index.get(rel), key)
        ]
        rels = tuple(rel for rel, _ in stale)
        pool = self.workers.for_batch(len(stale))
        job = (self.inputs.root, rels, self.inputs.settings.max_file_size)
        pending = pool.submit(import_lines_of, *job) if pool else None

        def store() -> None:
            found = pending.result() if pending else import_lines_of(*job)
            for (rel, key), lines in zip(stale, found):
                cache.put_import_lines(rel, key, lines.decode("utf-8", "surrogateescape"))

        return store

    def naming(self, names: Collection[str]) -> list[str]:
        """The source files that name one of `names` as a whole word. Each file's answers for the
        names asked before are kept under its content key, so a one-file run searches only the
        files changed since."""
        if self.inputs.warm is not None:
            sources = self.files.sources
            named_in = {
                rel
                for name in names
                for rel in self.inputs.warm.naming(name, sources, self.inputs.read, self.inputs.memory)
            }
            return [rel for rel in sources if rel in named_in]
        if self.inputs.cache is None:
            named = word_matcher(names)
            return [rel for rel in self.files.sources if named(self.inputs.read(rel))]
        wanted_names = frozenset(names)
        asked, held = self.inputs.cache.names()
        new = tuple(sorted(wanted_names.difference(asked)))
        if new:  # every file is read once for new names: every entry answers for all `asked`
            asked, held = ([], {}) if len(asked) + len(new) > _MAX_NAMES else (asked, held)
            asked = [*asked, *new]
        finder = functools.cache(_finder)
        query = functools.cache(lambda: word_matcher(wanted_names))
        updated: dict[str, list] = {}
        found = []
        for rel in self.files.sources:
            entry, key = held.get(rel), self.inputs.key(rel)
            kept = _current(entry, key)
            if kept and entry[1] is None:  # it names some of `asked`, not known which: read to tell
                holds, hit = None, query()(self.inputs.read(rel))
            elif kept and not new:
                holds, hit = entry[1], not wanted_names.isdisjoint(entry[1])
            else:
                known, wanted = (entry[1], new) if kept else ([], tuple(asked))
                holds = known + finder(wanted)(self.inputs.read(rel))
                hit = not wanted_names.isdisjoint(holds)
            if key is not None:  # one that cannot be read is read again next time
                updated[rel] = [key, holds]
            if hit:
                found.append(rel)
        if new or updated != held:
            self.inputs.cache.put_names(asked, updated)
        return found

    def answers(self, names: Collection[str]) -> bool:
        """Does the word index answer for `names` (all asked before), so that `naming` reads only
        the files changed since and those naming one of the names asked?"""
        return (
            self.inputs.warm is None
            and self.inputs.cache is not None
            and set(self.inputs.cache.names()[0]).issuperset(names)
        )

    def keep_names(self, asked: Collection[str], naming: Collection[str]) -> None:
        """A whole run searched every source file for the agent names in `asked`: keep its
        answers as the word index, so that a one-file run looking for an agent's subclasses
        reads only the files `naming` one of them (which ones it names is worked out no further:
        each agent's own file names it)."""
        if self.inputs.cache is None or not asked:
            return
        files = {
            rel: [key, None if rel in naming else []]
            for rel in self.files.sources
            if (key := self.inputs.key(rel)) is not None
        }
        self.inputs.cache.put_names(sorted(asked), files)


def _finder(names: tuple[str, ...]) -> Callable[[bytes | None], list[str]]:
    """Which of `names` a text names as whole words: the text's words looked up for ASCII
    identifiers (class names nearly always are), the others searched for one by one."""
    if as_words(names):
        found = names_found(names)
        return lambda data: sorted(found(data))
    matchers = [(name, word_matcher([name])) for name in names]
    return lambda data: [name for name, named in matchers if named(data)]


def _current(entry: list | None, key: str | None) -> bool:
    """Was an index entry (`[content key, ...]`) made from the file as it is now?"""
    return entry is not None and key is not None and entry[0] == key
