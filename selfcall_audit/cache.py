"""Content-addressed cache of per-file results in `.selfcall_audit_cache/`.

Facts and parsed YAML are pure functions of a file's bytes and the tool version, so the key
is a hash of the bytes in a file named after the version. The cache is JSON (never pickle: a cache folder in a cloned repo must not be able to run
code), written atomically so concurrent runs never see half a file, and it ignores itself
for git the way ruff's cache does.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .facts import Binding, CallFact, ClassFacts, FunctionFacts, Import, ModuleFacts
from .gym_config import Node, Where

_FORMAT = 1
_TYPES = {cls.__name__: cls for cls in (Binding, CallFact, ClassFacts, FunctionFacts, Import, ModuleFacts)}


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


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
        return {"k": list(value), "v": [_encode_yaml(v) for v in value.values()], "w": [value.where[k].line for k in value]}
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
    """Per-file results keyed by content: facts of Python files, parsed YAML documents.

    Loaded once and saved once per run; only entries used by the run are written back, so
    entries of deleted or renamed files drop out.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.file = folder / f"facts-v{_FORMAT}-{__version__}.json"
        self._entries: dict[str, list[Any]] = {}
        self._used: dict[str, list[Any]] = {}
        self._dirty = False
        try:
            loaded = json.loads(self.file.read_bytes())
            if isinstance(loaded, dict):
                self._entries = loaded
        except (OSError, ValueError):
            pass  # no cache yet, or a damaged one: start afresh

    def _get(self, name: str, key: str) -> Any:
        entry = self._entries.get(name)
        if not isinstance(entry, list) or len(entry) != 2 or entry[0] != key:
            return None
        self._used[name] = entry
        return entry[1]

    def _put(self, name: str, key: str, value: Any) -> None:
        self._used[name] = [key, value]
        self._dirty = True

    def facts(self, path: str, key: str) -> ModuleFacts | None:
        try:
            found = self._get(path, key)
            return _decode(found) if found is not None else None
        except (KeyError, TypeError, ValueError):
            return None

    def put_facts(self, path: str, key: str, facts: ModuleFacts) -> None:
        self._put(path, key, _encode(facts))

    def yaml(self, path: str, key: str) -> list[Node] | None:
        try:
            found = self._get(f"yaml:{path}", key)
            return [_decode_yaml(doc, path) for doc in found] if found is not None else None
        except (KeyError, TypeError, ValueError):
            return None

    def put_yaml(self, path: str, key: str, documents: list[Node]) -> None:
        self._put(f"yaml:{path}", key, [_encode_yaml(doc) for doc in documents])

    def save(self) -> None:
        if not self._dirty and len(self._used) == len(self._entries):
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Automatically created by selfcall-audit.\n*\n", encoding="utf-8")
            fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".facts-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self._used, handle, separators=(",", ":"))
            os.replace(temp, self.file)
        except OSError:
            pass  # a read-only checkout still scans; it is only slower next time
