"""Content-addressed cache of per-file results in `.selfcall_audit_cache/`.

Facts are a pure function of a file's path and bytes and of the tool version, so they are
keyed by a hash of path and bytes, in a folder named after the version; the YAML instances, an
index of import lines and the last whole-project result (with what that run saw of each file,
for `reuse`) are keyed by the files' stats. The
entries hold plain data only (marshal of tuples and strings, never pickle: a cache cannot run
code), signed with a key kept outside the repository and checked before anything is loaded (a
cache folder committed with a checkout cannot hide a self-call), each entry written atomically
so concurrent runs never see half a file; the folder ignores itself for git as ruff's does.

The cache lives inside the project root and is never reached through a symbolic link (a
checkout that commits `.selfcall_audit_cache -> ..` gets no cache, not a cache in its parent),
and cleaning it deletes only entries that carry our signature: a file the tool did not write is
never deleted, whatever its name.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
from collections.abc import Iterable
from dataclasses import fields
from functools import cache, lru_cache
from pathlib import Path

from .. import __version__
from ..ftypes import AgentInfo, Evidence, Finding
from .discovery import UnreadableFile, read_file

try:  # straight from the module hashlib takes it from: hashlib would also load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

TYPE_CHECKING = False  # typing is not imported at run time: it costs a one-file scan 3%
if TYPE_CHECKING:
    from typing import Any

    from ..analysis.facts import ModuleFacts
    from ..analysis.gym_config import AgentInstance


@lru_cache(maxsize=1)
def code_version() -> str:
    """The version plus a hash of the analysis code's files (names, sizes, modification times):
    a development install whose extraction or resolution changed must not reuse results of the
    old code."""
    digest = blake2b(__version__.encode(), digest_size=8)
    package = Path(__file__).parent.parent
    for folder in ("", "analysis", "workspace"):
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


class _Schema:
    """Cached dataclasses by name, their fields, and the fields that hold cached dataclasses
    (a "*" suffix: a tuple of them); every other field is plain data, stored as it is."""

    def __init__(self, classes: tuple[type, ...], nested: dict[type, dict[str, str]]):
        self.types = {cls.__name__: cls for cls in classes}
        self.fields = {cls: tuple(f.name for f in fields(cls)) for cls in classes}
        self.nested = nested


_REPORT_SCHEMA = _Schema((Finding, Evidence, AgentInfo), {Finding: {"evidence": "Evidence*"}})


@lru_cache(maxsize=1)
def _analysis_schema() -> _Schema:
    """Built on first use: a run answered from the snapshot never imports the analysis modules."""
    from ..analysis.facts import Binding, CallFact, ClassFacts, FunctionFacts, Import, ModuleFacts
    from ..analysis.gym_config import AgentInstance, ServerRef, Where

    return _Schema(
        (Binding, CallFact, ClassFacts, FunctionFacts, Import, ModuleFacts, AgentInstance, ServerRef, Where),
        {
            ModuleFacts: {
                "imports": "Import*",
                "constants": "Binding*",
                "classes": "ClassFacts*",
                "functions": "FunctionFacts*",
            },
            ClassFacts: {"constants": "Binding*", "instance_attrs": "Binding*", "methods": "FunctionFacts*"},
            FunctionFacts: {"calls": "CallFact*"},
            AgentInstance: {"where": "Where", "refs": "ServerRef*"},
            ServerRef: {"where": "Where"},
        },
    )


def _schema_for(cls_or_name: type | str) -> _Schema:
    known = _REPORT_SCHEMA.types if isinstance(cls_or_name, str) else _REPORT_SCHEMA.fields
    return _REPORT_SCHEMA if cls_or_name in known else _analysis_schema()


@cache
def _plan(name: str) -> tuple[type, tuple[str, ...], tuple[tuple[int, str, str, bool], ...]]:
    """The class named `name`, its fields, and for each field holding cached dataclasses: its
    place among the fields, its name, their class name and whether it is a tuple of them; worked
    out once per class."""
    schema = _schema_for(name)
    cls = schema.types[name]
    names = schema.fields[cls]
    nested = schema.nested.get(cls, {})
    steps = tuple(
        (place, field_name, nested[field_name].rstrip("*"), nested[field_name].endswith("*"))
        for place, field_name in enumerate(names)
        if field_name in nested
    )
    return cls, names, steps


def _encode(value: Any) -> tuple:
    """A dataclass becomes (name, *fields), nested dataclasses likewise."""
    name = type(value).__name__
    _, names, steps = _plan(name)
    encoded = [name, *(getattr(value, field_name) for field_name in names)]
    for place, _, _, many in steps:
        item = encoded[place + 1]
        encoded[place + 1] = tuple(_encode(element) for element in item) if many else _encode(item)
    return tuple(encoded)


def _encode_all(values: Iterable[Any]) -> tuple:
    return tuple(_encode(value) for value in values)


def _decode(value: tuple, expected: str) -> Any:
    """The inverse of `_encode` for one dataclass, checked against the type the schema expects.

    Fields are set straight into the new instance: these classes' `__init__` only assigns them,
    and a frozen dataclass's assignments cost four times as much (a one-file run decodes
    thousands of instances)."""
    if value[0] != expected:
        raise TypeError(f"{value[0]} where {expected} was expected")
    cls, names, steps = _plan(expected)
    if len(value) != len(names) + 1:
        raise ValueError(f"{expected} with {len(value) - 1} fields where {len(names)} were expected")
    instance = object.__new__(cls)
    fields_of = instance.__dict__
    fields_of.update(zip(names, value[1:]))
    for place, field_name, nested, many in steps:
        item = value[place + 1]
        fields_of[field_name] = tuple([_decode(e, nested) for e in item]) if many else _decode(item, nested)
    return instance


@lru_cache(maxsize=1)
def _signing_key() -> bytes | None:
    """A random key kept in the user's cache folder, outside any repository: entries signed with
    it cannot be forged by a cache folder that arrives with a checkout. None: no caching."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "selfcall-audit"
    path = home / "signing-key"
    if not os.path.lexists(path):
        try:
            home.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            key = os.urandom(_KEY_SIZE)
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
            return key
        except FileExistsError:  # another run created it first
            pass
        except OSError:
            return None
    try:  # a regular file only, read within bounds: a named pipe or /dev/zero there is no key
        key = read_file(path, _KEY_SIZE)
    except UnreadableFile:
        return None
    return key if len(key) == _KEY_SIZE else None  # cut short by a full disk: not a key either


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_KEY_SIZE = 32
_MAX_ENTRY_SIZE = 1 << 30  # far above any real entry; what stops a link to /dev/zero is `read_file`
_GITIGNORE = b"# Automatically created by selfcall-audit.\n*\n"


def _signature(key: bytes, payload: bytes) -> bytes:
    return blake2b(payload, key=key[:64], digest_size=16).hexdigest().encode()


def _same(key: bytes, a: bytes, b: bytes) -> bool:
    """A comparison whose time tells nothing about where the inputs differ (hmac's double-MAC way:
    hmac itself would load OpenSSL)."""
    return blake2b(a, key=key[:64]).digest() == blake2b(b, key=key[:64]).digest()


def _load(path: Path, key: bytes) -> Any:
    """An entry's value, or None if it is missing, damaged or not signed with our key. Only bytes
    this tool wrote reach `marshal` (it is not meant for data from elsewhere)."""
    payload = _signed_payload(path, key)
    try:
        return None if payload is None else marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None


def _signed_payload(path: Path, key: bytes) -> bytes | None:
    """The entry's payload if it is a regular file (not a link) signed with our key."""
    if os.path.islink(path):
        return None
    try:
        signature, _, payload = read_file(path, _MAX_ENTRY_SIZE).partition(b"\n")
    except UnreadableFile:
        return None
    return payload if _same(key, signature, _signature(key, payload)) else None


def _ours(path: Path, key: bytes) -> bool:
    """Did this tool write the file? Only then may cleaning delete it."""
    return _signed_payload(path, key) is not None


def _is_folder(path: Path) -> bool:
    """A directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _dump(path: Path, key: bytes, value: Any) -> None:
    """Written under a name of its own, then renamed over the entry: readers see all or nothing."""
    payload = marshal.dumps(value, 4)
    temp = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(temp, "xb") as handle:
            handle.write(_signature(key, payload) + b"\n" + payload)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _real_folders(root: Path, folders: Iterable[str]) -> bool:
    """Is each of these root-relative folders, where it exists, a folder of its own: neither a
    symbolic link nor anything else but a directory, nor below one?"""
    for folder in folders:
        path = root
        for part in Path(folder).parts:
            path = path / part
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    return False
            except FileNotFoundError:
                break
            except OSError:
                return False
    return True


def _make_folders(root: Path, folder: str) -> None:
    """Create the root-relative `folder` one level at a time, none through a symbolic link."""
    path = root
    for part in Path(folder).parts:
        path = path / part
        try:
            os.mkdir(path)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise NotADirectoryError(path) from None


_KINDS = ("facts", "instances")


class FactsCache:
    """Facts of Python files keyed by path and content, one small file each so that a run reads
    only what it needs; the YAML instances; the import-line index; the last whole-project result.

    A whole-project run deletes the entries it did not use: those of files since changed,
    renamed or deleted, and those of other versions of the tool, each only once it is shown to
    carry our signature.
    """

    def __init__(self, project: Path, name: str, key: bytes):
        self.project = project
        self.name = name  # the cache folder, relative to the project root
        self.version = f"v{code_version()}"
        self.root = project / name
        self.folder = self.root / self.version
        self.key = key
        self._used: set[Path] = set()
        self._new: dict[Path, Any] = {}
        self._imports: dict[str, list[Any]] | None = None

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / kind / f"{key}.dat"

    @classmethod
    def open(cls, project: Path, name: str) -> FactsCache | None:
        """The cache in the folder `name` of the project root, or None (no caching) when that
        folder would be outside the root or reached through a symbolic link, or there is no key."""
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or parts == (".",):
            return None
        cache = cls(project, name, b"")
        if not _real_folders(project, cache._folders()):
            return None
        key = _signing_key()
        if not key:
            return None
        cache.key = key
        return cache

    def _folders(self) -> list[str]:
        """Every folder the cache writes in, relative to the project root."""
        return [
            self.name,
            f"{self.name}/{self.version}",
            *(f"{self.name}/{self.version}/{k}" for k in _KINDS),
        ]

    def _get(self, kind: str, key: str) -> Any:
        path = self._path(kind, key)
        value = _load(path, self.key)
        if value is not None:
            self._used.add(path)
        return value

    def _put(self, kind: str, key: str, value: Any) -> None:
        path = self._path(kind, key)
        self._new[path] = value
        self._used.add(path)

    def facts(self, path: str, key: str) -> ModuleFacts | None:
        try:
            found = self._get("facts", key)
            return _decode(found, "ModuleFacts") if found is not None else None
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put_facts(self, path: str, key: str, facts: ModuleFacts) -> None:
        self._put("facts", key, _encode(facts))

    def snapshot(self, fingerprint: str | None) -> dict[str, Any] | None:
        """The last whole-project result, if it was computed for exactly these files and settings
        (any fingerprint: whatever it was computed for, with its "fingerprint")."""
        try:
            found = _load(self.folder / "snapshot.dat", self.key)
            if found is None or fingerprint not in (None, found["fingerprint"]):
                return None
            return {
                "fingerprint": found["fingerprint"],
                "findings": [_decode(f, "Finding") for f in found["findings"]],
                "suppressed": found["suppressed"],
                "errors": dict(found["errors"]),
                "files_scanned": found["files_scanned"],
                "agent_count": found["agent_count"],
                "agents": [_decode(a, "AgentInfo") for a in found["agents"]]
                if found["agents"] is not None
                else None,
            }
        except (OSError, AttributeError, KeyError, TypeError, ValueError, IndexError):
            return None

    def observed(self, fingerprint: str) -> dict[str, Any] | None:
        """What the run behind the snapshot of this fingerprint saw of each file (see `reuse`)."""
        found = _load(self.folder / "observed.dat", self.key)
        if not isinstance(found, dict) or found.get("fingerprint") != fingerprint:
            return None
        return found.get("observed")

    def put_snapshot(self, fingerprint: str, result: dict[str, Any], observed: dict[str, Any] | None) -> None:
        encoded = {key: _encode_all(v) if isinstance(v, list) else v for key, v in result.items()}
        self._new[self.folder / "snapshot.dat"] = {**encoded, "fingerprint": fingerprint}
        self._new[self.folder / "observed.dat"] = {"fingerprint": fingerprint, "observed": observed}

    def instances(self, key: str) -> tuple[list[AgentInstance], dict[str, str]] | None:
        try:
            found = self._get("instances", key)
            if found is None:
                return None
            return [_decode(i, "AgentInstance") for i in found["instances"]], dict(found["errors"])
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put_instances(self, key: str, instances: list[AgentInstance], errors: dict[str, str]) -> None:
        self._put("instances", key, {"instances": _encode_all(instances), "errors": errors})

    def imports(self) -> dict[str, list[Any]]:
        """path → [size, mtime, import lines]: which files import what, without reading them."""
        if self._imports is None:
            loaded = _load(self.folder / "imports.dat", self.key)
            self._imports = loaded if isinstance(loaded, dict) else {}
        return self._imports

    def put_import_lines(self, path: str, stat: tuple[int, int], lines: str) -> None:
        self.imports()[path] = [*stat, lines]
        self._new[self.folder / "imports.dat"] = self._imports

    def save(self, prune: bool) -> None:
        """Write new entries atomically; `prune` (a whole-project run) drops unused ones. The
        folders are checked again first: nothing is written or deleted through a link put there
        since the cache was opened."""
        try:
            if not _real_folders(self.project, self._folders()):
                return
            if self._new:
                self._create()
            for path, value in self._new.items():
                _dump(path, self.key, value)
            if prune:
                self._prune()
        except OSError:
            pass  # a read-only checkout still scans; it is only slower next time
        finally:
            self._new.clear()

    def _create(self) -> None:
        """The cache's folders; a new cache folder also gets a `.gitignore` that ignores it."""
        created = not os.path.lexists(self.root)
        for folder in self._folders()[1:]:
            _make_folders(self.project, folder)
        if created:
            fd = os.open(self.root / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_GITIGNORE)

    def _prune(self) -> None:
        """Delete our entries this run did not use, and those of other versions; a file without
        our signature stays, and so does the folder holding it."""
        for kind in _KINDS:
            for entry in (self.folder / kind).glob("*.dat"):
                if entry not in self._used and _ours(entry, self.key):
                    entry.unlink(missing_ok=True)
        with os.scandir(self.root) as entries:
            others = [e.path for e in entries if e.name != self.version and e.is_dir(follow_symlinks=False)]
        for other in map(Path, others):
            for folder in (*(other / kind for kind in _KINDS), other):
                if not _is_folder(folder):
                    continue
                for entry in folder.iterdir():
                    if entry.suffix == ".dat" and _ours(entry, self.key):
                        entry.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty: what we did not write keeps its folder
