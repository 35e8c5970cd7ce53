"""The audited repo's tests that model the HTTP self-call `fix` just removed, named for the user.

Such a test fakes `server_client.post` for the agent's own `/v1/responses`, or asserts the posted
paths, server names or cookies of the self-call; after the rewrite that call no longer goes through
`server_client.post`, so the test may fail or hang although the agent is right. The test files that
sit in a rewritten module's folder or name it are read, in worker processes, and each of their tests
is asked how it models the self-call (`modelling`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, NamedTuple

from ..workspace.discovery import discover, test_code_matcher
from ..workspace.workers import Workers
from .modelling import FUNCTIONS, Exercises, Function, ModuleFunctions, how_modelled

if TYPE_CHECKING:
    from .modelling import Modelling


@dataclass(frozen=True)
class Rewritten:
    """A method whose self-call `fix` rewrote, in a root-relative file."""

    path: str
    method: str


@dataclass(frozen=True)
class ImpactedTest:
    """A test to update: its pytest node id, the line it starts on, how it models the self-call to
    `route`, and the rewritten files (root-relative) whose self-call it models."""

    node_id: str
    line: int
    models: Modelling
    route: str
    modules: tuple[str, ...] = ()


def impacted_tests(
    root: Path, rewritten: Iterable[Rewritten], route: str, exclude: tuple[str, ...] = (), jobs: int = 0
) -> list[ImpactedTest]:
    """Tests of the project that model the HTTP self-call of one of the `rewritten` methods; the
    test files that may test a rewritten module are read in `jobs` worker processes (0: one per
    CPU) when there are two or more."""
    by_file: dict[str, set[str]] = {}
    for item in sorted(rewritten, key=lambda item: item.path):  # whatever order they come in
        by_file.setdefault(item.path, set()).add(item.method)
    if not by_file:
        return []
    marks = {path: _marks(path) for path in by_file}
    files = discover(root, exclude, True, ())
    is_test = test_code_matcher()
    candidates: list[tuple[str, bytes, list[str]]] = []  # test files, and the rewritten modules they may test
    for rel in sorted(r for r in files.modules if r.endswith(".py") and is_test(r)):
        try:
            source = (root / rel).read_bytes()
        except OSError:
            continue
        if tested := [path for path in by_file if _tests_module(rel, source, marks[path])]:
            candidates.append((rel, source, tested))
    # the methods reaching the rewritten ones, worked out only for the modules a test file may test
    wanted = sorted({path for _, _, tested in candidates for path in tested})
    workers = Workers(jobs, min_batch=2)
    try:
        reaching = dict(
            zip(wanted, workers.map(_callers, [(root / p, by_file[p]) for p in wanted], chunksize=1))
        )
        searches = [
            _Search(rel, source, {path: reaching[path] for path in tested}, route)
            for rel, source, tested in candidates
        ]
        return [test for found in workers.map(_searched, searches, chunksize=1) for test in found]
    finally:
        workers.close()


class Impact:
    """The search for the tests of the methods `fix` means to rewrite, started before it plans the
    rewrites (beside the loading of libcst, which leaves the other core idle), and asked after
    for the methods it did rewrite: the same ones take that search's answer; any others are
    searched for again."""

    def __init__(
        self, root: Path, methods: list[Rewritten], route: str, exclude: tuple[str, ...], workers: Workers
    ):
        self.root, self.route, self.exclude = root, route, exclude
        self.methods = frozenset(methods)
        self._found = functools.cache(workers.background(impacted_tests, root, methods, route, exclude, 1))

    def of(self, methods: list[Rewritten], jobs: int = 0) -> list[ImpactedTest]:
        """The tests that model the HTTP self-call of one of `methods` (see `impacted_tests`)."""
        found = self._found()  # asked for in any case: its process is then done with
        if frozenset(methods) == self.methods:
            return found
        return impacted_tests(self.root, methods, self.route, self.exclude, jobs)


class _Search(NamedTuple):
    """One test file that may test a rewritten module, as a worker process is handed it."""

    rel: str
    source: bytes
    tested: dict[str, set[str]]  # rewritten module → the methods reaching its rewritten ones
    route: str


def _searched(job: _Search) -> list[ImpactedTest]:
    try:
        tree = ast.parse(job.source, job.rel)
    except (SyntaxError, ValueError):
        return []
    return list(_impacted_in(job.rel, tree, job.tested, job.route))


def _callers(module: tuple[Path, set[str]]) -> set[str]:
    """The methods and every function of the module that calls one of them through `self.` (as
    `run` calls `_run_once`, which holds the self-call), transitively: `module` is the file and
    its rewritten methods."""
    path, methods = module
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return methods
    calls: dict[str, set[str]] = {}  # by name, what functions call through `self.`, nested ones' too

    def visit(node: ast.AST, enclosing: tuple[set[str], ...]) -> None:
        if isinstance(node, FUNCTIONS):
            enclosing = (*enclosing, calls.setdefault(node.name, set()))
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_self(node.func.value)
        ):
            for names in enclosing:
                names.add(node.func.attr)
        for child in ast.iter_child_nodes(node):
            visit(child, enclosing)

    visit(tree, ())  # one walk: a walk of each function would walk its nested functions again
    reaching = set(methods)
    while grown := {name for name, called in calls.items() if name not in reaching and called & reaching}:
        reaching |= grown
    return reaching


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def module_name(rel: str) -> str:
    """The dotted module of a root-relative Python file (a `src/` layout's folder left out)."""
    parts = PurePosixPath(rel).with_suffix("").parts
    return ".".join(parts[1:] if parts[0] == "src" else parts)


def _marks(rewritten: str) -> tuple[str, bytes]:
    """What `_tests_module` looks for of a rewritten module: its folder (as the start of a path
    below it; empty at the root), and its dotted name."""
    folder = PurePosixPath(rewritten).parent
    return (f"{folder}/" if folder.parts else ""), module_name(rewritten).encode("utf-8", "surrogateescape")


def _tests_module(test: str, source: bytes, marks: tuple[str, bytes]) -> bool:
    """Does the test sit in the rewritten module's folder (NeMo Gym: `<agent>/tests/`), or name it?
    (Every test file is asked for every rewritten module: plain string tests.)"""
    folder, dotted = marks
    if folder and test.startswith(folder):
        return True
    return dotted in source


def _impacted_in(
    rel: str, tree: ast.Module, tested: dict[str, set[str]], route: str
) -> Iterator[ImpactedTest]:
    module = ModuleFunctions(tree)
    helpers = Exercises(module, {m for names in tested.values() for m in names})
    per_file = {path: Exercises(module, names) for path, names in tested.items()}
    for node_id, function in _test_functions(rel, tree):
        models = how_modelled(module, function, route, helpers.exercises(function))
        if models is not None:
            exercised = tuple(path for path, file in per_file.items() if file.exercises(function))
            yield ImpactedTest(node_id, function.lineno, models, route, exercised or tuple(tested))


def _test_functions(rel: str, tree: ast.Module) -> Iterator[tuple[str, Function]]:
    for node in tree.body:
        if isinstance(node, FUNCTIONS) and node.name.startswith("test"):
            yield f"{rel}::{node.name}", node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, FUNCTIONS) and item.name.startswith("test"):
                    yield f"{rel}::{node.name}::{item.name}", item
