"""Content-addressed cache of per-file results in `.selfcall_audit_cache/`.

Facts and parsed YAML are pure functions of a file's path and bytes and of the tool version,
so entries are keyed by a hash of path and bytes, in a folder named after the version. The
cache is JSON (never pickle: a cache folder in a cloned repo must not be able to run code),
each entry written atomically so concurrent runs never see half a file, and it ignores itself
for git the way ruff's cache does.
"""

from __future__ import annotations

import hashlib
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


class FactsCache:
    """Per-file results keyed by path and content (facts of Python files, parsed YAML), one
    small JSON file each so a run reads only what it needs; plus the last whole-project result.

    A whole-project run deletes the entries it did not use: those of files since changed,
    renamed or deleted.
    """

    def __init__(self, folder: Path):
        self.root = folder
        self.folder = folder / f"v{code_version()}"
        self._used: set[Path] = set()
        self._new: dict[Path, Any] = {}
        self._imports: dict[str, list[Any]] | None = None

    def _path(self, kind: str, key: str) -> Path:
        return self.folder / kind / f"{key}.json"

    def _get(self, kind: str, key: str) -> Any:
        path = self._path(kind, key)
        try:
            value = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None  # not there yet, or damaged: computed afresh
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
            found = json.loads((self.folder / "snapshot.json").read_bytes())
            if found.get("fingerprint") != fingerprint:
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
            try:
                loaded = json.loads((self.folder / "imports.json").read_bytes())
                self._imports = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._imports = {}
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
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
                with os.fdopen(fd, "wb") as handle:
                    handle.write(json.dumps(value, separators=(",", ":")).encode())
                os.replace(temp, path)
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
