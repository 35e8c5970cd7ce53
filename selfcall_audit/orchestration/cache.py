"""Content-addressed cache of per-file results in `.selfcall_audit_cache/`.

Facts are a pure function of a file's path and bytes and of the tool version, so they are
keyed by a hash of path and bytes, in a folder named after the version; the YAML instances, an
index of import lines, a word index of the class names one-file runs searched for, what
`Inputs.remembered` keeps and the last few whole-project results (with what the last run saw
of each file, for `reuse`) are keyed by the files' content keys too: never by size and
modification time, which an edit can leave as they were.
A file's content key is read back without reading the file only while its full status (change
time, inode and device as well: see `FileSet.statuses`) is the one it was recorded with, and a
whole listing's fingerprint while every file's status is as it was then. Entries
hold plain data (`codec`), signed and written atomically (`entries`); the folder ignores itself
for git as ruff's does.

The cache lives inside the project root and is never reached through a symbolic link (a
checkout that commits `.selfcall_audit_cache -> ..` gets no cache, not a cache in its parent),
and cleaning it deletes only entries that carry our signature: a file the tool did not write is
never deleted, whatever its name.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..workspace.entries import (
    NOFOLLOW,
    dump,
    is_folder,
    load,
    make_folders,
    marshalled,
    ours,
    real_folders,
    signed_payload,
    signing_key,
)
from ..workspace.signals import signals_held
from .codec import decode, encode, encode_all
from .keys import code_version, statuses_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from typing import Any

    from ..analysis.facts import ModuleFacts
    from ..analysis.gym_config import AgentInstance
    from ..ftypes import InputError
    from ..workspace.discovery import Status

_GITIGNORE = b"# Automatically created by selfcall-audit.\n*\n"


def facts_payload(facts: ModuleFacts) -> bytes:
    """A file's facts as their cache entry stores them (worked out where they were extracted)."""
    return marshalled(encode(facts))


_KINDS = ("facts", "instances")
# Whole-project results kept, each under its listing's fingerprint: the states a checkout goes back
# to (the staged files pre-commit scans and the work tree, one branch and another) each answer at
# once, not after the last result is checked against them file by file.
_SNAPSHOTS = 4
_REMEMBERED = 8  # values `remember` keeps (and `Inputs.remembered` in a long-lived process' memory)


def keep_last(kept: dict[Any, Any], key: Any, value: Any) -> None:
    """`kept[key] = value`, the oldest entries dropped past a few: an edited file's earlier bytes
    are seldom asked about again."""
    kept[key] = value
    while len(kept) > _REMEMBERED:
        del kept[next(iter(kept))]


class FactsCache:
    """Facts of Python files keyed by path and content, one small file each so that a run reads
    only what it needs; the YAML instances; the import-line index; the last whole-project results.

    A whole-project run deletes the entries it did not use: those of files since changed,
    renamed or deleted, and those of other versions of the tool, each only once it is shown to
    carry our signature.
    """

    def __init__(self, project: Path, name: str, key: bytes, read_only: bool = False):
        self.project = project
        self.read_only = read_only  # another tree's analysis reads it: `save` writes nothing
        self.name = name  # the cache folder, relative to the project root
        self.version = f"v{code_version()}"
        self.root = project / name
        self.folder = self.root / self.version
        self.key = key
        self._used: set[Path] = set()
        self._new: dict[Path, bytes] = {}  # entries to write, as stored
        self._indexes: dict[str, dict[str, Any]] = {}  # content-keyed indexes, by file name
        self._changed: set[str] = set()
        self._statuses: dict[str, Status] = {}  # the settled statuses of the files this run keyed

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / kind / f"{key}.dat"

    @classmethod
    def open(cls, project: Path, name: str, read_only: bool = False) -> FactsCache | None:
        """The cache in the folder `name` of the project root, or None (no caching) when that
        folder would be outside the root or reached through a symbolic link, or there is no key."""
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or parts == (".",):
            return None
        cache = cls(project, name, b"", read_only)
        if not real_folders(project, cache._folders()):
            return None
        key = signing_key()
        if not key:
            return None
        cache.key = key
        return cache

    def _folders(self) -> list[str]:
        """Every folder the cache writes in, relative to the project root."""
        return [
            self.name,
            f"{self.name}/{self.version}",
            *(f"{self.name}/{self.version}/{k}" for k in (*_KINDS, "snapshots")),
        ]

    def _get(self, kind: str, key: str) -> Any:
        path = self._path(kind, key)
        value = load(path, self.key)
        if value is not None:
            self._used.add(path)
        return value

    def _put(self, kind: str, key: str, data: bytes) -> None:
        path = self._path(kind, key)
        self._new[path] = data
        self._used.add(path)

    def facts(self, path: str, key: str) -> ModuleFacts | None:
        try:
            found = self._get("facts", key)
            return decode(found, "ModuleFacts") if found is not None else None
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def same_facts(self, then: str, now: str) -> bool:
        """Are the facts stored under the content key `then` byte for byte those under `now` (just
        extracted, or stored)? Equal bytes are equal facts, found without decoding either; equal
        facts may still be stored in other bytes (marshal marks an object by its reference
        count), so False says only that they must be decoded and compared."""
        payloads = []
        for key in (then, now):
            path = self._path("facts", key)
            payload = self._new.get(path)
            if payload is None:
                payload = signed_payload(path, self.key)
                if payload is None:
                    return False
            self._used.add(path)
            payloads.append(payload)
        return payloads[0] == payloads[1]

    def holds_facts(self, key: str) -> bool:
        """Is there an entry for these facts? (Not read, and not counted as used.)"""
        return os.path.isfile(self._path("facts", key))

    def put_facts(self, key: str, payload: bytes) -> None:
        """Keep a file's facts, given as `facts_payload` made them."""
        self._put("facts", key, payload)

    def snapshot(self, fingerprint: str) -> dict[str, Any] | None:
        """The whole-project result computed for exactly these files and settings, if it is one
        of the last few kept."""
        try:
            found = load(self._snapshot_path(fingerprint), self.key)
            if found is None or found["fingerprint"] != fingerprint:
                return None
            return {
                "findings": [decode(f, "Finding") for f in found["findings"]],
                "suppressed": found["suppressed"],
                "errors": [decode(e, "InputError") for e in found["errors"]],
                "files_scanned": found["files_scanned"],
                "agent_count": found["agent_count"],
                "agents": [decode(a, "AgentInfo") for a in found["agents"]]
                if found["agents"] is not None
                else None,
                "outside": dict(found["outside"]),
            }
        except (OSError, AttributeError, KeyError, TypeError, ValueError, IndexError):
            return None

    def observed(self) -> tuple[str, dict[str, Any]] | None:
        """The fingerprint of the last whole-project result stored, and what the run behind it saw
        of each file (see `reuse`); None when it saw nothing a later run can trust."""
        found = load(self.folder / "observed.dat", self.key)
        if not isinstance(found, dict) or not isinstance(found.get("observed"), dict):
            return None
        return found.get("fingerprint"), found["observed"]

    def put_snapshot(self, fingerprint: str, result: dict[str, Any], observed: dict[str, Any] | None) -> None:
        """Keep a whole-project result under its fingerprint, the newest of `_SNAPSHOTS`: the
        oldest beyond them goes when the cache is saved."""
        encoded = {key: encode_all(v) if isinstance(v, list) else v for key, v in result.items()}
        self._new[self._snapshot_path(fingerprint)] = marshalled({**encoded, "fingerprint": fingerprint})
        self._new[self.folder / "observed.dat"] = marshalled(
            {"fingerprint": fingerprint, "observed": observed}
        )
        recent = [fingerprint, *(f for f in self.recent() if f != fingerprint)]
        self._indexes["recent"] = {"snapshots": recent[:_SNAPSHOTS]}
        self._changed.add("recent")

    def recent(self) -> list[str]:
        """The fingerprints of the whole-project results kept, the newest first."""
        found = self._index("recent").get("snapshots")
        return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []

    def _snapshot_path(self, fingerprint: str) -> Path:
        return self.folder / "snapshots" / f"{fingerprint}.dat"

    def instances(self, key: str) -> tuple[list[AgentInstance], dict[str, InputError]] | None:
        try:
            found = self._get("instances", key)
            if found is None:
                return None
            errors = (decode(e, "InputError") for e in found["errors"])
            return [decode(i, "AgentInstance") for i in found["instances"]], {e.path: e for e in errors}
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put_instances(self, key: str, instances: list[AgentInstance], errors: dict[str, InputError]) -> None:
        encoded = {"instances": encode_all(instances), "errors": encode_all(errors.values())}
        self._put("instances", key, marshalled(encoded))

    def _index(self, name: str) -> dict[str, Any]:
        if name not in self._indexes:
            loaded = load(self.folder / f"{name}.dat", self.key)
            self._indexes[name] = loaded if isinstance(loaded, dict) else {}
        return self._indexes[name]

    def imports(self) -> dict[str, list[Any]]:
        """path → [content key, import lines]: which files import what, without parsing them."""
        return self._index("imports")

    def put_import_lines(self, path: str, key: str, lines: str) -> None:
        self.imports()[path] = [key, lines]
        self._changed.add("imports")

    def remembered(self, key: str) -> list[Any] | None:
        """`[value]` as `remember` kept it under `key`, or None."""
        return self._index("remembered").get(key)

    def remember(self, key: str, value: Any) -> None:
        """Keep `value` under `key`, with the last few kept before it (`keep_last`)."""
        keep_last(self._index("remembered"), key, [value])
        self._changed.add("remembered")

    def known_key(self, rel: str, status: Status | None) -> str | None:
        """The content key a run recorded for the file, if its status (settled, as listed, see
        `FileSet.statuses`) is the one it had then: reading it would give the same bytes."""
        if status is None:
            return None
        self._statuses[rel] = status  # in use: kept when pruned; recorded with its key if new
        entry = self._index("statuses").get(rel)  # (status, key)
        return entry[1] if entry is not None and entry[0] == status else None

    def known_keys(self, statuses: dict[str, Status]) -> dict[str, str]:
        """`known_key` of every file listed with these statuses, those it knows."""
        self._statuses.update(statuses)
        recorded = self._index("statuses")
        return {
            rel: entry[1]
            for rel, status in statuses.items()
            if (entry := recorded.get(rel)) is not None and entry[0] == status
        }

    def keep_key(self, rel: str, key: str) -> None:
        """Record the file's content key with the status it was listed with, before it was read."""
        if (status := self._statuses.get(rel)) is not None:
            self._index("statuses")[rel] = (status, key)
            self._changed.add("statuses")

    def settled_fingerprint(
        self,
        setup: str,
        statuses: dict[str, Status],
        unsettled: Collection[str],
        key: Callable[[str], str | None],
    ) -> str | None:
        """The fingerprint recorded for this setup when the settled files (see `FileSet.statuses`)
        had these very statuses, as `known_key` vouches for one file's key, and the files that had
        not settled were these, with the content keys `key` gives them now (only they are read)."""
        found = self._index("settled")
        if found.get("setup") != setup or found.get("unsettled", {}).keys() != set(unsettled):
            return None
        if found.get("statuses") != statuses_digest(statuses):
            return None
        if any(key(rel) != content for rel, content in found["unsettled"].items()):
            return None
        self._statuses.update(statuses)  # in use, as `known_key` marks them
        return found.get("fingerprint")

    def put_settled_fingerprint(
        self, setup: str, statuses: dict[str, Status], unsettled: dict[str, str], fingerprint: str
    ) -> None:
        """Record the fingerprint worked out for this setup while the settled files had these
        statuses (a `statuses_digest` of them) and the others these content keys."""
        self._indexes["settled"] = {
            "setup": setup,
            "statuses": statuses_digest(statuses),
            "unsettled": unsettled,
            "fingerprint": fingerprint,
        }
        self._changed.add("settled")

    def names(self) -> tuple[list[str], dict[str, list[Any]]]:
        """The names asked of the word index, and path → [content key, the names the file holds]."""
        found = self._index("names")
        return found.get("asked", []), found.get("files", {})

    def put_names(self, asked: list[str], files: dict[str, list[Any]]) -> None:
        self._indexes["names"] = {"asked": asked, "files": files}
        self._changed.add("names")

    def save(self, prune: bool) -> None:
        """Write new entries atomically; `prune` (a whole-project run) drops unused ones. The
        folders are checked again first: nothing is written or deleted through a link put there
        since the cache was opened."""
        if self.read_only or not (prune or self._changed or self._new):  # or a warm run that learned nothing
            return
        try:
            if not real_folders(self.project, self._folders()):
                return
            statuses = self._indexes.get("statuses", {})
            if prune and statuses.keys() - self._statuses.keys():  # of files no longer listed
                self._indexes["statuses"] = {rel: statuses[rel] for rel in statuses if rel in self._statuses}
                self._changed.add("statuses")
            for name in self._changed:
                self._new[self.folder / f"{name}.dat"] = marshalled(self._indexes[name])
            if self._new:
                self._create()
            with signals_held():
                for path, data in self._new.items():
                    dump(path, self.key, data)
            if prune:
                self._prune()
            elif "recent" in self._changed:
                self._prune_snapshots()
        except OSError:
            pass  # a read-only checkout still scans; it is only slower next time
        finally:
            self._new.clear()
            self._changed.clear()

    def _prune_snapshots(self) -> None:
        """Delete our whole-project results that are no longer among the newest kept."""
        kept = {self._snapshot_path(f) for f in self.recent()}
        for entry in (self.folder / "snapshots").glob("*.dat"):
            if entry not in kept and ours(entry, self.key):
                entry.unlink(missing_ok=True)

    def _create(self) -> None:
        """The cache's folders; a new cache folder also gets a `.gitignore` that ignores it."""
        created = not os.path.lexists(self.root)
        for folder in self._folders()[1:]:
            make_folders(self.project, folder)
        if created:
            fd = os.open(self.root / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_GITIGNORE)

    def _prune(self) -> None:
        """Delete our entries this run did not use, and those of other versions; a file without
        our signature stays, and so does the folder holding it."""
        for kind in _KINDS:
            for entry in (self.folder / kind).glob("*.dat"):
                if entry not in self._used and ours(entry, self.key):
                    entry.unlink(missing_ok=True)
        self._prune_snapshots()
        with os.scandir(self.root) as entries:
            others = [e.path for e in entries if e.name != self.version and e.is_dir(follow_symlinks=False)]
        for other in map(Path, others):
            for folder in (*(other / kind for kind in (*_KINDS, "snapshots")), other):
                if not is_folder(folder):
                    continue
                for entry in folder.iterdir():
                    if entry.suffix == ".dat" and ours(entry, self.key):
                        entry.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty: what we did not write keeps its folder
