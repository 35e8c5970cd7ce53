"""What a stored result depends on: the tool, the settings that change findings and the file list
(together, the setup), then the content of each file a run reads.

Content, not size and modification time: a same-size edit whose time is put back (`cp -p`,
`rsync -t`, a fixed `SOURCE_DATE_EPOCH`) would otherwise be answered with the old result. (The
cache vouches for a file's content key without reading it only while the file's change time,
which no such tool puts back, is as recorded.)"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from ..config import Settings
from ..workspace.discovery import FileSet
from .cache import FactsCache
from .keys import blake2b, code_version


def analysis_settings(settings: Settings) -> tuple:
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


class Fingerprints:
    """Fingerprints of one listing of the project's files."""

    def __init__(self, settings: Settings, files: FileSet):
        self.files = files
        # The interpreter's version too: which files parse depends on its grammar.
        described = (
            code_version(),
            sys.version_info[:2],
            analysis_settings(settings),
            files.sources,
            files.configs,
        )
        digest = blake2b(repr(described).encode("utf-8", "surrogateescape"), digest_size=16)
        # each name and a NUL, in one piece
        digest.update("\0".join([*sorted(files.modules), ""]).encode("utf-8", "surrogateescape"))
        self.setup = digest.hexdigest()

    def of(self, key: Callable[[str], str | None], only: Iterable[str] | None = None) -> str | None:
        """The setup and the content key of each source and config file (of `only`, if given);
        None when a file has none (it cannot be read)."""
        lines = []
        for rel in sorted([*self.files.sources, *self.files.configs]) if only is None else only:
            content = key(rel)
            if content is None:
                return None
            lines.append(f"{rel}\0{content}\n")
        digest = blake2b(self.setup.encode(), digest_size=16)
        digest.update("".join(lines).encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def of_settled(
        self, cache: FactsCache, key: Callable[[str], str | None], keys: dict[str, str | None]
    ) -> str | None:
        """`of` every file, without looking up a content key per file when every settled file's
        status is the one the last answer was worked out under (a digest of the statuses says so)
        and the files that had not settled then, the same as now, have the same content (only they
        are read: a file rewritten with the same bytes a moment ago, by a formatter that changed
        nothing or a checkout that put it back); else `keys`, the content keys `key` answers from,
        first takes those the cache recorded of the files whose status is as recorded, all in one
        pass."""
        statuses = self.files.statuses
        unsettled = [rel for rel in (*self.files.sources, *self.files.configs) if rel not in statuses]
        known = cache.settled_fingerprint(self.setup, statuses, unsettled, key)
        if known is None:
            keys.update(cache.known_keys(statuses))
            known = self.of(key)
            if known is not None:
                contents = {rel: key(rel) for rel in unsettled}
                cache.put_settled_fingerprint(self.setup, statuses, contents, known)  # type: ignore[arg-type]
        return known
