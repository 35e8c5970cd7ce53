"""What a stored result depends on: the tool, the settings that change findings and the file list
(together, the setup), then each file's size and modification time."""

from __future__ import annotations

from collections.abc import Iterable

from ..config import Settings
from ..workspace.discovery import FileSet
from .cache import code_version

try:  # straight from the module hashlib takes it from: hashlib would also load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b


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
        described = (code_version(), analysis_settings(settings), files.sources, files.configs)
        digest = blake2b(repr(described).encode("utf-8", "surrogateescape"), digest_size=16)
        for rel in sorted(files.modules):
            digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        self.setup = digest.hexdigest()

    def of(self, only: Iterable[str] | None = None) -> str | None:
        """The setup and each file's size and modification time (those of `only`, if given);
        None when a file has no stats."""
        digest = blake2b(self.setup.encode(), digest_size=16)
        stats = self.files.stats
        for rel in sorted(self.files.modules | set(self.files.configs)) if only is None else only:
            if rel not in stats:
                return None
            size, mtime = stats[rel]
            digest.update(f"{rel}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()
