"""The package's shape as a spec: the pipeline's layers import downward only, no module imports
itself back through others, and every front end reaches the analysis through `api.py`."""

from __future__ import annotations

import ast
from pathlib import Path

import selfcall_audit

PACKAGE = Path(selfcall_audit.__file__).parent

# Top to bottom: a module may import its own layer's modules and those of the layers below.
LAYERS = (
    ("frontends", "testing", "__main__"),
    ("api",),
    ("migrate",),
    ("report",),
    ("orchestration",),
    ("analysis",),
    ("workspace",),
    ("config", "rules", "ftypes"),
)
STANDALONE = ("__init__", "inprocess")  # the version; the helper copied into audited repos
FRONT_ENDS = LAYERS[0]


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _layer(module: str) -> int | None:
    top = module.split(".")[0]
    if top in STANDALONE:
        return None
    return next(i for i, names in enumerate(LAYERS) if top in names)


def _imports(path: Path) -> set[str]:
    """The package's modules that `path` imports, anywhere in it (in functions too)."""
    own = _module(path).split(".")
    package = own if path.name == "__init__.py" else own[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.startswith("selfcall_audit"):
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:  # `from . import policy`: the module, if it is one
                candidate = [*target, alias.name]
                named = PACKAGE.joinpath(*candidate)
                is_module = named.with_suffix(".py").exists() or (named / "__init__.py").exists()
                found.add(".".join(candidate if is_module else target))
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".", 1)[1] for a in node.names if a.name.startswith("selfcall_audit.")}
    return {m for m in found if m}


GRAPH = {_module(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_is_in_a_layer():
    unplaced = [m for m in GRAPH if m.split(".")[0] not in STANDALONE and _layer(m) is None]
    assert unplaced == []


def test_imports_point_downward():
    upward = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _layer(module) is not None and _layer(target) is not None and _layer(target) < _layer(module)
    ]
    assert upward == []


def test_standalone_modules_import_nothing_of_the_package():
    assert {m: GRAPH[m] - {""} for m in STANDALONE if GRAPH[m] - {""}} == {}


def test_no_import_cycle():
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target in GRAPH and target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in GRAPH:
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_front_ends_reach_the_analysis_only_through_the_api():
    bypasses = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.split(".")[0] in FRONT_ENDS
        for target in targets
        if target.split(".")[0] in ("analysis", "orchestration")
    ]
    assert bypasses == []
