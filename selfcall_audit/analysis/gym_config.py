"""Server instances from NeMo Gym YAML configs, read by `yaml_nodes` and never constructed.

Understands `_inherit_from`, top-level `config_paths`, the OmegaConf missing marker `???` and
simple `${a.b}` interpolations; resolvers (`${oc.env:X}`) are never run and stay unresolved.
Hostile input is bounded: besides `yaml_nodes`' bounds on each file, `${...}` expansion and
`config_paths` chains have limits; nothing outside the project root is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from posixpath import normpath
from typing import NamedTuple

from ..ftypes import InputError
from .yaml_nodes import ConfigFileError, Node, Where, parse_yaml

AGENT_TYPE = "responses_api_agents"
MISSING = "???"
_MAX_CHAIN = 100  # files chained one into the next by `config_paths`; real chains are 1 to 3 deep
_MAX_LOOKUPS = 100  # `${...}` references followed for one value
_MAX_INTERPOLATED = 10_000  # characters of one interpolated value
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.\-]*)\}")


class ServerRef(NamedTuple):
    key: str
    type: str | None
    name: str | None
    where: Where


class AgentInstance(NamedTuple):
    name: str
    where: Where  # the instance's top-level key
    impl: str
    agent_dir: str  # root-relative folder of the implementation
    entrypoint: str | None  # root-relative module path, e.g. responses_api_agents/x/app.py
    refs: tuple[ServerRef, ...]

    @property
    def self_refs(self) -> tuple[ServerRef, ...]:
        """Server references that point back at this very instance."""
        return tuple(r for r in self.refs if r.type == AGENT_TYPE and r.name == self.name)


def _inside_root(rel: str) -> bool:
    return rel != ".." and not rel.startswith("../")


def _merge(base: object, override: object) -> object:
    if isinstance(base, Node) and isinstance(override, Node):
        merged = Node(base)
        merged.where.update(base.where)
        for key, value in override.items():
            merged[key] = _merge(base.get(key), value)
            merged.where[key] = override.where[key]
        return merged
    return override


def _lookup(namespace: Node, dotted: str) -> object:
    value: object = namespace
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _interpolate(value: object, namespace: Node, budget: list[int] | None = None) -> object:
    """Resolve `${a.b}` references that name another value; anything else stays as written.

    At most `_MAX_LOOKUPS` references are followed and no value grows past `_MAX_INTERPOLATED`
    characters, so reference cycles and exponential expansions stay unresolved instead of hanging.
    """
    budget = [_MAX_LOOKUPS] if budget is None else budget
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = _INTERPOLATION.fullmatch(value)
    if whole:
        budget[0] -= 1
        target = _lookup(namespace, whole.group(1)) if budget[0] >= 0 else None
        resolved = _interpolate(target, namespace, budget) if target is not None else value
        return resolved if budget[0] >= 0 else value

    def substitute(match: re.Match[str]) -> str:
        budget[0] -= 1
        if budget[0] < 0:
            return match.group(0)
        target = _interpolate(_lookup(namespace, match.group(1)), namespace, budget)
        return target if isinstance(target, str) else match.group(0)

    result = _INTERPOLATION.sub(substitute, value)
    return result if budget[0] >= 0 and len(result) <= _MAX_INTERPOLATED else value


class ConfigSet:
    """All agent instances of a project, from the YAML files that can define them."""

    def __init__(self, read: Callable[[str], bytes | None], exists: Callable[[str], bool]):
        """`read`: a file's bytes (None: it cannot be read, and defines nothing)."""
        self._read = read
        self._exists = exists
        self._parsed: dict[str, list[Node]] = {}
        self._namespaces: dict[str, Node] = {}
        self._plans: dict[str, list[str | Node]] = {}
        self._missing: set[str] = set()  # `config_paths` targets reported missing (once each)
        self._too_deep: set[str] = set()  # files whose chain was cut at `_MAX_CHAIN`
        self.errors: dict[str, InputError] = {}
        self.failed: set[str] = set()  # files that could not be parsed

    def _documents(self, path: str) -> list[Node]:
        if path not in self._parsed:
            data = self._read(path)
            try:
                self._parsed[path] = [] if data is None else parse_yaml(path, data)
            except ConfigFileError as exc:
                self.errors[path] = InputError(path, str(exc), "yaml", exc.line, exc.column)
                self.failed.add(path)
                self._parsed[path] = []
        return self._parsed[path]

    def _namespace(self, path: str) -> Node:
        """The file merged over the files its `config_paths` chain in, each file once (a chain back
        to a file already merged is cut), in NeMo Gym's order: a file's chained files before it.
        The order is found with a stack of its own, not by recursion, at most `_MAX_CHAIN` files
        deep; the documents are then merged into one new mapping, so a file's cost is the size of
        what it chains in, and no namespace is copied for another."""
        if path in self._namespaces:
            return self._namespaces[path]
        namespace = Node()
        for document in self._layers(path):
            for key, value in document.items():
                namespace[key] = _merge(namespace.get(key), value)
                namespace.where[key] = document.where[key]
        self._namespaces[path] = namespace
        return namespace

    def _layers(self, path: str) -> list[Node]:
        """The documents merged into the file's namespace, in order."""
        order: list[Node] = []
        done = {path}
        stack = [(path, iter(self._steps(path)))]
        while stack:
            current, steps = stack[-1]
            step = next(steps, None)
            if step is None:
                stack.pop()
            elif isinstance(step, Node):
                order.append(step)
            elif step not in done:
                done.add(step)
                if len(stack) < _MAX_CHAIN:
                    stack.append((step, iter(self._steps(step))))
                elif current not in self._too_deep:  # said once per file, naming the first not read
                    self._too_deep.add(current)
                    message = f"config_paths chain more than {_MAX_CHAIN} files deep; {step} not read"
                    self._error(InputError(current, message, "config_paths"))
        return order

    def _steps(self, path: str) -> list[str | Node]:
        """Each document of the file after the files its `config_paths` name (worked out once)."""
        if path not in self._plans:
            self._plans[path] = [
                step
                for document in self._documents(path)
                for step in (*self._chained(path, document), document)
            ]
        return self._plans[path]

    def _chained(self, path: str, document: Node) -> list[str]:
        """The files a `config_paths` list names, found as NeMo Gym finds them: relative to the
        Gym root (the folder it runs from, holding `pyproject.toml`: the config's nearest such
        folder, then the project root). A missing file is an error of the config naming it; an
        absolute path is taken from the project root, nothing outside the root is read, and an
        entry built with `${...}` is skipped (resolvers are never run)."""
        entries = document.get("config_paths")
        where = document.where.get("config_paths")
        line = where.line if where is not None else 1
        found = []
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, str) or "${" in entry:
                continue
            rel = normpath(entry.lstrip("/"))
            candidates = [normpath(f"{base}/{rel}") for base in self._gym_roots(path)] + [rel]
            candidates = [c for c in dict.fromkeys(candidates) if _inside_root(c)]
            match = next((c for c in candidates if self._exists(c)), None)
            if match is not None:
                found.append(match)
            elif candidates:
                if candidates[-1] not in self._missing:  # said once, where it is first named
                    self._missing.add(candidates[-1])
                    message = (
                        f"config_paths entry {entry!r} was not found (looked for {', '.join(candidates)})"
                    )
                    self._error(InputError(path, message, "config_paths", line))
            else:
                message = f"config_paths entry {entry!r} is outside the project root (not read)"
                self._error(InputError(path, message, "config_paths", line))
        return found

    def _gym_roots(self, path: str) -> list[str]:
        """The nearest folder above the config, below the project root, holding a pyproject.toml."""
        folders = path.split("/")[:-1]
        for end in range(len(folders), 0, -1):
            folder = "/".join(folders[:end])
            if self._exists(f"{folder}/pyproject.toml"):
                return [folder]
        return []

    def _error(self, error: InputError) -> None:
        known = self.errors.get(error.path)
        self.errors[error.path] = error if known is None else known.joined(error)

    def instances(self, paths: tuple[str, ...]) -> list[AgentInstance]:
        found: list[AgentInstance] = []
        for path in paths:
            namespace = self._namespace(path)
            # In the order written (a set's order would follow the hash seed, and reports with it).
            own_keys = dict.fromkeys(k for document in self._documents(path) for k in document)
            for key in own_keys:
                instance = self._instance(key, namespace, path)
                if instance is not None:
                    found.append(instance)
        return found

    def _instance(self, name: str, namespace: Node, path: str) -> AgentInstance | None:
        body = namespace.get(name)
        if not isinstance(body, Node):
            return None
        parent = body.get("_inherit_from")
        if isinstance(parent, str) and parent != name and isinstance(namespace.get(parent), Node):
            body = _merge(namespace[parent], body)  # type: ignore[assignment]
        agents = body.get(AGENT_TYPE)
        if not isinstance(agents, Node) or not agents:
            return None
        impl, impl_cfg = next(iter(agents.items()))
        if not isinstance(impl_cfg, Node):
            return None
        refs = []
        pairs = list(impl_cfg.items())
        for key, value in impl_cfg.items():  # a mapping of references (`participants: {a: {...}}`)
            if isinstance(value, Node) and "name" not in value:
                pairs += [(f"{key}.{k}", v) for k, v in value.items() if isinstance(v, Node) and "name" in v]
        for key, value in pairs:
            if isinstance(value, Node) and "name" in value:
                ref_type = _interpolate(value.get("type"), namespace)
                ref_name = _interpolate(value.get("name"), namespace)
                refs.append(
                    ServerRef(
                        key,
                        ref_type if isinstance(ref_type, str) else None,
                        ref_name if isinstance(ref_name, str) and ref_name != MISSING else None,
                        value.where.get("name", impl_cfg.where[key.split(".")[0]]),
                    )
                )
        # In the Gym root of the config (a project in a sub-folder has its own); an impl key that
        # does not match its folder: the folder of the file that set the entrypoint (an instance
        # inheriting it from another file takes that file's folder).
        base = "".join(f"{folder}/" for folder in self._gym_roots(path))
        agent_dir = f"{base}{AGENT_TYPE}/{impl}"
        written = impl_cfg.where.get("entrypoint", Where(path, 1)).path
        if not self._exists(agent_dir) and written.startswith(f"{base}{AGENT_TYPE}/"):
            agent_dir = "/".join(written.split("/")[: base.count("/") + 2])
        entrypoint = _interpolate(impl_cfg.get("entrypoint"), namespace)
        module = normpath(f"{agent_dir}/{entrypoint}") if isinstance(entrypoint, str) else None
        if module is not None and not _inside_root(module):
            module = None
        return AgentInstance(
            name=name,
            where=namespace.where.get(name, Where(path, 1)),
            impl=impl,
            agent_dir=agent_dir,
            entrypoint=module,
            refs=tuple(refs),
        )
