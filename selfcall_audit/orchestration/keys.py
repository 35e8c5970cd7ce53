"""What stored results are keyed by: the code that made them, each file's path and bytes, the
listing's statuses; and the one hash function all of them use."""

from __future__ import annotations

import marshal
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__

try:  # straight from the module hashlib takes it from: hashlib would also load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

if TYPE_CHECKING:
    from ..workspace.discovery import Status

__all__ = ["blake2b", "code_version", "content_key", "statuses_digest"]


@lru_cache(maxsize=1)
def code_version() -> str:
    """The version plus a hash of the analysis code's files (names, sizes, modification times):
    a development install whose extraction or resolution changed must not reuse results of the
    old code."""
    # the interpreter too: a file one Python's grammar cannot parse may parse under a newer one
    digest = blake2b(f"{__version__}\0{sys.version_info[0]}.{sys.version_info[1]}".encode(), digest_size=8)
    package = Path(__file__).parent.parent
    for folder in ("", "analysis", "orchestration", "workspace"):
        for source in sorted(os.scandir(package / folder), key=lambda entry: entry.name):
            if source.name.endswith(".py"):
                stat = source.stat()
                digest.update(f"{folder}/{source.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"{__version__}-{digest.hexdigest()}"


def content_key(path: str, data: bytes) -> str:
    """Results depend on the bytes and on the path they are reported under."""
    digest = blake2b(path.encode("utf-8", "surrogateescape"), digest_size=16)
    digest.update(b"\0")
    digest.update(data)
    return digest.hexdigest()


def statuses_digest(statuses: dict[str, Status]) -> bytes:
    """A digest of the listing's statuses, in its order (marshal's version 2 writes no
    back-references, whose use depends on reference counts: equal mappings, equal bytes)."""
    return blake2b(marshal.dumps(statuses, 2), digest_size=16).digest()
