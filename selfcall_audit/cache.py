"""Content-addressed cache of per-file results in `.selfcall_audit_cache/`.

Facts and parsed YAML are pure functions of a file's path and bytes and of the tool version,
so entries are keyed by a hash of path and bytes, in a folder named after the version. The
cache is JSON (never pickle: a cache folder in a cloned repo must not be able to run code),
signed with a key kept outside the repository (a committed cache folder cannot hide a
self-call), each entry written atomically so concurrent runs never see half a file, and it
ignores itself for git the way ruff's cache does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import tempfile
from dataclasses import fields, is_dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import __version__
from .facts import Binding, CallFact, ClassFacts, FunctionFacts, Import, ModuleFacts
from .findings import AgentInfo, Evidence, Finding
from .gym_config import AgentInstance, Node, ServerRef, Where  # noqa: F401 - decoded by name


@lru_cache(maxsize=1)
def code_version() -> str:
    """The version plus a hash of the analysis code: a development install whose extraction or
    resolution changed must not reuse results of the old code."""
    digest = hashlib.blake2b(__version__.encode(), digest_size=8)
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return f"{__version__}-{digest.hexdigest()}"


_TYPES = {
    cls.__name__: cls
    for cls in (
        Binding,
        CallFact,
        ClassFacts,
        FunctionFacts,
        Import,
        ModuleFacts,
        Finding,
        Evidence,
        AgentInfo,
    )
}


def content_key(path: str, data: bytes) -> str:
    """Results depend on the bytes and on the path they are reported under."""
    digest = hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=16)
    digest.update(b"\0")
    digest.update(data)
    return digest.hexdigest()


def _encode(value: Any) -> Any:
    """Dataclasses become {"@": name, "v": [fields...]}; tuples become lists."""
    if is_dataclass(value):
        return {"@": type(value).__name__, "v": [_encode(getattr(value, f.name)) for f in fields(value)]}
    if type(value) is tuple:
        return [_encode(item) for item in value]
    return value


def _decode(value: Any) -> Any:
    kind = type(value)
    if kind is list:
        return tuple(map(_decode, value))
    if kind is dict:
        return _TYPES[value["@"]](*map(_decode, value["v"]))
    return value


def _encode_yaml(value: Any) -> Any:
    if isinstance(value, Node):
        return {
            "k": list(value),
            "v": [_encode_yaml(v) for v in value.values()],
            "w": [value.where[k].line for k in value],
        }
    if isinstance(value, list):
        return [_encode_yaml(item) for item in value]
    return value


def _decode_yaml(value: Any, path: str) -> Any:
    if isinstance(value, dict):
        node = Node(zip(value["k"], (_decode_yaml(v, path) for v in value["v"])))
        node.where = {k: Where(path, line) for k, line in zip(value["k"], value["w"])}
        return node
    if isinstance(value, list):
        return [_decode_yaml(item, path) for item in value]
    return value


@lru_cache(maxsize=1)
def _signing_key() -> bytes | None:
    """A random key kept in the user's cache folder, outside any repository: entries signed with
    it cannot be forged by a cache folder that arrives with a checkout. None: no caching."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "selfcall-audit"
    path = home / "signing-key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        home.mkdir(parents=True, exist_ok=True)
        key = os.urandom(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key
    except FileExistsError:  # another run created it first
        return path.read_bytes()
    except OSError:
        return None


def _signature(key: bytes, payload: bytes) -> bytes:
    return hashlib.blake2b(payload, key=key[:64], digest_size=16).hexdigest().encode()


def _load(path: Path, key: bytes) -> Any:
    """An entry's value, or None if it is missing, damaged or not signed with our key."""
    try:
        signature, _, payload = path.read_bytes().partition(b"\n")
        if not hmac.compare_digest(signature, _signature(key, payload)):
            return None
        return json.loads(payload)
    except (OSError, ValueError):
        return None


def _dump(path: Path, key: bytes, value: Any) -> None:
    payload = json.dumps(value, separators=(",", ":")).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(_signature(key, payload) + b"\n" + payload)
    os.replace(temp, path)


class FactsCache:
    """Per-file results keyed by path and content (facts of Python files, parsed YAML), one
    small JSON file each so a run reads only what it needs; plus the last whole-project result.

    A whole-project run deletes the entries it did not use: those of files since changed,
    renamed or deleted.
    """

    def __init__(self, folder: Path, key: bytes):
        self.root = folder
        self.folder = folder / f"v{code_version()}"
        self.key = key
        self._used: set[Path] = set()
        self._new: dict[Path, Any] = {}
        self._imports: dict[str, list[Any]] | None = None

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / kind / f"{key}.json"

    @classmethod
    def open(cls, folder: Path) -> FactsCache | None:
        key = _signing_key()
        return cls(folder, key) if key else None

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
            decoded = _decode(found) if found is not None else None
            return decoded if isinstance(decoded, ModuleFacts) else None  # damaged: computed afresh
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put_facts(self, path: str, key: str, facts: ModuleFacts) -> None:
        self._put("facts", key, _encode(facts))

    def yaml(self, path: str, key: str) -> list[Node] | None:
        try:
            found = self._get("yaml", key)
            if not isinstance(found, list) or not all(isinstance(doc, dict) for doc in found):
                return None  # not there yet, or damaged: parsed afresh
            return [_decode_yaml(doc, path) for doc in found]
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put_yaml(self, path: str, key: str, documents: list[Node]) -> None:
        self._put("yaml", key, [_encode_yaml(doc) for doc in documents])

    def snapshot(self, fingerprint: str) -> dict[str, Any] | None:
        """The last whole-project result, if it was computed for exactly these files and settings."""
        try:
            found = _load(self.folder / "snapshot.json", self.key)
            if found is None or found.get("fingerprint") != fingerprint:
                return None
            return {
                "findings": list(_decode(found["findings"])),
                "suppressed": found["suppressed"],
                "errors": dict(found["errors"]),
                "files_scanned": found["files_scanned"],
                "agent_count": found["agent_count"],
                "agents": list(_decode(found["agents"])) if found["agents"] is not None else None,
            }
        except (OSError, AttributeError, KeyError, TypeError, ValueError, IndexError):
            return None

    def put_snapshot(self, fingerprint: str, result: dict[str, Any]) -> None:
        encoded = {key: _encode(tuple(v) if isinstance(v, list) else v) for key, v in result.items()}
        self._new[self.folder / "snapshot.json"] = {"fingerprint": fingerprint, **encoded}

    def instances(self, key: str) -> tuple[list[AgentInstance], dict[str, str]] | None:
        try:
            found = self._get("instances", key)
            return (list(_decode(found["instances"])), dict(found["errors"])) if found is not None else None
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put_instances(self, key: str, instances: list[AgentInstance], errors: dict[str, str]) -> None:
        self._put("instances", key, {"instances": _encode(tuple(instances)), "errors": errors})

    def imports(self) -> dict[str, list[Any]]:
        """path → [size, mtime, import lines]: which files import what, without reading them."""
        if self._imports is None:
            loaded = _load(self.folder / "imports.json", self.key)
            self._imports = loaded if isinstance(loaded, dict) else {}
        return self._imports

    def put_import_lines(self, path: str, stat: tuple[int, int], lines: str) -> None:
        self.imports()[path] = [*stat, lines]
        self._new[self.folder / "imports.json"] = self._imports

    def save(self, prune: bool) -> None:
        """Write new entries atomically; `prune` (a whole-project run) drops unused ones."""
        try:
            if self._new and not (self.root / ".gitignore").exists():
                self.root.mkdir(parents=True, exist_ok=True)
                (self.root / ".gitignore").write_text("# Automatically created by selfcall-audit.\n*\n")
            for path, value in self._new.items():
                _dump(path, self.key, value)
            if prune:
                self._prune()
        except OSError:
            pass  # a read-only checkout still scans; it is only slower next time
        self._new.clear()

    def _prune(self) -> None:
        for old in self.root.glob("v*"):
            if old != self.folder and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        for kind in ("facts", "yaml", "instances"):
            for entry in (self.folder / kind).glob("*.json"):
                if entry not in self._used:
                    entry.unlink(missing_ok=True)
