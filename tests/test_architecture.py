"""The package's shape as a spec: the pipeline's layers import downward only, no module imports
itself back through others, and every front end reaches the analysis through `api.py`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import ForwardRef

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


# Imports inside functions, each with why it is not at its module's top. A new one fails the test
# below: import at the module's top instead (or say here why not); one that goes away is struck
# from the list. The last group is start-up kept off the paths that do not need it, where a path
# of its own for the one-file run is what should replace it; benchmarks/deferred_imports.py
# measures what each saves a warm scan (one that saves nothing belongs at its module's top).
DEFERRED_IMPORTS = {
    # an optional dependency, or the module one Python version has
    ("config", "tomllib"),
    ("config", "tomli"),
    ("frontends.cli", ".lsp"),  # pygls: the language server's extra
    # only the platform that needs it
    ("workspace.listing", "subprocess"),  # no posix_spawn
    ("workspace.write", "ctypes"),  # renameat2 on Linux
    ("workspace.workers", "ctypes"),  # the parent-death signal on Linux
    # the command that uses them, from the command line's one module
    ("frontends.cli", ".fixing"),
    ("frontends.cli", ".vendoring"),
    ("frontends.cli", "..report"),
    ("frontends.cli", "..report.docs"),
    ("frontends.quick", ".cli"),
    ("__main__", ".frontends.cli"),
    ("__main__", ".frontends.quick"),
    ("api", ".migrate.codemod"),
    ("api", ".migrate.fixes"),
    # start-up kept off a warm or one-file run that does not need them
    ("analysis.yaml_nodes", "yaml"),
    ("frontends.commands", "..report.baseline"),
    ("frontends.commands", ".diffbase"),
    ("frontends.commands", "click"),
    ("frontends.display", "rich.console"),
    ("frontends.display", "rich.progress"),
    ("frontends.ending", "traceback"),
    # libcst: only a fix with something to rewrite (see migrate/fixes.py)
    ("frontends.fixing", "..migrate.record_app"),
    ("frontends.fixing", "..migrate.test_update"),
    ("migrate.codemod", ".rewrite"),
    ("report.text", ".frames"),  # rich and pygments: only findings are drawn with them
    ("orchestration.codec", "..analysis.expr"),
    ("orchestration.codec", "..analysis"),
    ("orchestration.jobs", "..analysis.extract"),
    ("orchestration.jobs", "..analysis.facts"),
    ("orchestration.jobs", "..analysis.gym_config"),
    ("orchestration.jobs", "..analysis.kept_functions"),
    ("orchestration.project", ".analysing"),  # the workers, the facts store, the reuse check
    ("orchestration.project", ".stages"),  # the analysis' modules: not for a result that holds
    ("workspace.workers", "concurrent.futures"),
    ("workspace.workers", "multiprocessing"),
}


def _imported_in_functions(path: Path) -> set[tuple[str, str]]:
    module = _module(path)
    found = set()
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom):
                    found.add((module, "." * node.level + (node.module or "")))
                elif isinstance(node, ast.Import):
                    found |= {(module, alias.name) for alias in node.names}
    return found


# Modules of value types evaluate their annotations: `typing.NamedTuple` compiles each field's
# annotation that is a string (all of them under `from __future__ import annotations`) when the
# class is made, in every run that loads the module (`benchmarks/annotation_cost.py`).
EVALUATED_ANNOTATIONS = (
    "ftypes",
    "rules",
    "analysis.limits",
    "analysis.calls",
    "analysis.facts",
    "analysis.policy",
)


def test_the_value_types_of_modules_that_evaluate_their_annotations_hold_no_string():
    for name in EVALUATED_ANNOTATIONS:
        module = importlib.import_module(f"selfcall_audit.{name}")
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        assert not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body), name
        classes = [
            c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__
        ]
        fields = {
            f"{c.__name__}.{field}": hint
            for c in classes
            if issubclass(c, tuple) and hasattr(c, "_fields")
            for field, hint in c.__annotations__.items()
        }
        assert fields, name
        assert not {f for f, hint in fields.items() if isinstance(hint, str | ForwardRef)}, name


def test_imports_inside_functions_are_only_those_listed_with_why():
    found = set().union(*(_imported_in_functions(p) for p in sorted(PACKAGE.rglob("*.py"))))

    assert sorted(found - DEFERRED_IMPORTS) == [], "import these at the module's top"
    assert sorted(DEFERRED_IMPORTS - found) == [], "no longer imported in a function: strike them"
