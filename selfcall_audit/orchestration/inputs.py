"""A project's files as one run reads them: their bytes (kept, or let go and read again when
needed), their content keys, why one could not be read, and what costly pure functions of
their bytes gave."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..config import Settings
from ..ftypes import InputError
from ..workspace.discovery import FileSet, Status, TooLarge, UnreadableFile, read_file
from ..workspace.prefilter import base_tokens, mentions_any, word_matcher
from .cache import FactsCache, keep_last
from .jobs import Search, files_naming
from .keys import content_key

if TYPE_CHECKING:
    from ..workspace.workers import Workers
    from .warm import Warm

T = TypeVar("T")

_SEARCHES = 8  # parts of the files a later prefilter round reads again, shared out among the workers


class Inputs:
    """The files of one project root, read for one run (or, with `warm`, for a long-lived
    process' runs)."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        cache: FactsCache | None,
        sources: Mapping[str, bytes] | None = None,
        warm: Warm | None = None,
    ):
        """`sources`: root-relative paths whose text is read from memory (an editor's unsaved buffer);
        `warm`: what earlier runs of a long-lived process learnt of the project."""
        self.root = root
        self.settings = settings
        self.cache = cache
        self.warm = warm
        self.errors: dict[str, InputError] = {}
        # Files that could not be read (not those skipped for their size) or parsed: a result that
        # met one is never stored, so that it is looked at again once it can be.
        self.failed: set[str] = set()
        self._bytes: dict[str, bytes] = dict(sources or {})
        self.memory = frozenset(self._bytes)  # the files read from memory
        self._let_go: set[str] = set()  # read, their bytes not kept (see `read`)
        self.tokens = base_tokens(settings.agent_bases, settings.route)
        self.content_keys: dict[str, str | None] = {}  # by path, worked out or recorded
        self.statuses: Mapping[str, Status] = {}  # of the last listing, as `FileSet.statuses`

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
            self.content_keys[rel] = f"skipped:{exc.size}"  # what it holds does not matter, its size does
            return None
        except UnreadableFile as exc:
            self.errors[rel] = exc.entry(rel)
            self.failed.add(rel)
            return None
        if self.warm:
            self.warm.remember(rel, data)
        elif rel in self._let_go:
            if content_key(rel, data) != self.content_keys.get(rel):
                self._changed(rel)
                return None
            self._bytes[rel] = data  # needed after all
        elif rel in self.memory or mentions_any(data, self.tokens):
            self._bytes[rel] = data
        else:
            if rel not in self.content_keys:
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
        return rel not in self._let_go and mentions_any(self.read(rel), self.tokens)

    def naming(self, rels: Iterable[str], names: Collection[str], pool: Workers) -> list[str]:
        """The files among `rels` (all read before) that name one of `names` as a whole word: the
        bytes kept are searched here, the files let go are read again by `pool`'s workers when they
        run (here otherwise), each checked to be as it was."""
        rels = list(rels)
        named = word_matcher(names)
        found = {rel for rel in rels if named(self.peek(rel))}
        again = [rel for rel in rels if rel in self._let_go and rel not in self._bytes]
        searches = [
            Search(self.root, tuple(again[part::_SEARCHES]), tuple(names), self.settings.max_file_size)
            for part in range(_SEARCHES)
        ]
        for chunk in pool.map(files_naming, searches):
            for rel, key, hit in chunk:
                if key is None:  # it cannot be read now: `read` says why
                    self.read(rel)
                elif key != self.content_keys.get(rel):
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
        if rel not in self.content_keys:
            status = self.statuses.get(rel)
            if self.cache is not None and (known := self.cache.known_key(rel, status)) is not None:
                self.content_keys[rel] = known
                return known
            data = self.read(rel)
            if rel not in self.content_keys:  # `read` worked out the key of a file it let go
                self._learn_key(rel, data)
        return self.content_keys[rel]

    def _learn_key(self, rel: str, data: bytes | None) -> None:
        self.content_keys[rel] = None if data is None else content_key(rel, data)
        if data is not None and self.cache is not None:
            self.cache.keep_key(rel, self.content_keys[rel])

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

    def contents(self, files: FileSet) -> dict[str, str | None]:
        """The content key of each source and config file."""
        return {rel: self.key(rel) for rel in (*files.sources, *files.configs)}
