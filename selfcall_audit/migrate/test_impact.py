"""The audited repo's tests that model the HTTP self-call `fix` just removed, named for the user.

Such a test fakes `server_client.post` for the agent's own `/v1/responses`, or asserts the posted
paths, server names or cookies of the self-call; after the rewrite that call no longer goes through
`server_client.post`, so the test may fail or hang although the agent is right. A test is named when
it exercises a rewritten method (calls `agent.run(...)`, not `asyncio.run(...)`, or posts to `/run`
through a test client) and its own body mentions the route, or it (or a function of its module it
calls) replaces the client's `post`, whose fake then answered the self-call in its turn
(`side_effect=[seed, model, verify]`). A test is also named when it serves the agent's app as
`setup_webserver()` builds it, without the exception middleware that its fake of the self-call
emulated, and checks an error's text.
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

if TYPE_CHECKING:
    from typing import Literal

    # How a test models the HTTP self-call (`report.messages.modelled` words it): "fakes_and_asserts"
    # (fakes the client's post for the route and asserts what the self-call posted), "asserts"
    # (asserts it went through the client), "fakes_route" (fakes the client's post for the route),
    # "fakes_post" (fakes the client's post, which answered the self-call too), "middleware"
    # (serves the app without the exception middleware its fake of the route emulated).
    Modelling = Literal["fakes_and_asserts", "asserts", "fakes_route", "fakes_post", "middleware"]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Function = ast.FunctionDef | ast.AsyncFunctionDef


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
        if isinstance(node, _FUNCTIONS):
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
    module = _Module(tree)
    helpers = _Helpers(module, {m for names in tested.values() for m in names})
    per_file = {path: _Helpers(module, names) for path, names in tested.items()}
    for node_id, function in _test_functions(rel, tree):
        models = None
        if helpers.exercises(function):
            models = _models_self_call(function, route) or _fakes_post(module, function)
        if models is None:
            models = _relies_on_emulated_middleware(module, function, route)
        if models is not None:
            exercised = tuple(path for path, file in per_file.items() if file.exercises(function))
            yield ImpactedTest(node_id, function.lineno, models, route, exercised or tuple(tested))


def _test_functions(rel: str, tree: ast.Module) -> Iterator[tuple[str, _Function]]:
    for node in tree.body:
        if isinstance(node, _FUNCTIONS) and node.name.startswith("test"):
            yield f"{rel}::{node.name}", node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, _FUNCTIONS) and item.name.startswith("test"):
                    yield f"{rel}::{node.name}::{item.name}", item


class _Module:
    """A test module's functions, each walked once however many tests reach it (a test file's
    hundred tests share a few fixtures and helpers)."""

    def __init__(self, tree: ast.Module):
        self.defined: dict[str, list[_Function]] = {}
        for node in ast.walk(tree):
            if isinstance(node, _FUNCTIONS):
                self.defined.setdefault(node.name, []).append(node)
        # What a call by name can reach: the module's functions and its classes' methods (nested
        # functions are part of the function that defines them).
        self.callable: dict[str, list[_Function]] = {}
        for node in tree.body:
            for item in node.body if isinstance(node, ast.ClassDef) else [node]:
                if isinstance(item, _FUNCTIONS):
                    self.callable.setdefault(item.name, []).append(item)
        self._nodes: dict[_Function, list[ast.AST]] = {}
        self._reached: dict[_Function, list[_Function]] = {}
        # the names `import` statements bind (see `_Helpers._of_a_module`)
        self.modules = {
            alias.asname or alias.name.partition(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }

    def nodes(self, function: _Function) -> list[ast.AST]:
        if function not in self._nodes:
            self._nodes[function] = list(ast.walk(function))
        return self._nodes[function]

    def calls(self, function: _Function) -> Iterator[ast.Call]:
        return (node for node in self.nodes(function) if isinstance(node, ast.Call))

    def reached(self, function: _Function) -> list[_Function]:
        """The test and the functions and methods of its module it calls, transitively."""
        if function not in self._reached:
            seen, todo = [function], [function]
            while todo:
                for node in self.calls(todo.pop()):
                    for callee in self.callable.get(_called_name(node) or "", ()):
                        if all(callee is not known for known in seen):
                            seen.append(callee)
                            todo.append(callee)
            self._reached[function] = seen
        return self._reached[function]


class _Helpers:
    """Does a test exercise a rewritten method: call it (`agent.run(...)`), post to its route
    (`client.post("/run")`), or call a function or method of the test module that does?"""

    def __init__(self, module: _Module, methods: set[str]):
        self.module = module
        self.methods = methods
        self.routes = {f"/{method}" for method in methods}
        self.memo: dict[str, bool] = {}

    def exercises(self, function: _Function) -> bool:
        for node in self.module.calls(function):
            name = _called_name(node)
            if (name in self.methods and not self._of_a_module(node)) or any(
                isinstance(a, ast.Constant) and a.value in self.routes for a in node.args
            ):
                return True
            if name in self.module.defined and name != function.name and self._helper_exercises(name):
                return True
        return False

    def _of_a_module(self, call: ast.Call) -> bool:
        """`asyncio.run(agent.responses(...))`: a function of a module the test imports, which
        shares the rewritten method's name only."""
        func = call.func
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.module.modules
        )

    def _helper_exercises(self, name: str) -> bool:
        if name not in self.memo:
            self.memo[name] = False  # a recursive helper does not exercise through itself
            self.memo[name] = any(self.exercises(f) for f in self.module.defined[name])
        return self.memo[name]


def _models_self_call(function: ast.AST, route: str) -> Modelling | None:
    """How the test's own body models the self-call over HTTP, or None."""
    checks = [n for n in ast.walk(function) if isinstance(n, ast.Assert) or _is_mock_assertion(n)]
    inside_checks = {id(n) for check in checks for n in ast.walk(check)}
    asserted = any(_mentions(check, route) for check in checks)
    faked = any(
        _mentions(n, route)
        for n in ast.walk(function)
        if id(n) not in inside_checks and (isinstance(n, (ast.Compare, ast.Dict)) or _is_endswith(n))
    )
    if asserted and faked:
        return "fakes_and_asserts"
    if asserted:
        return "asserts"
    if faked:
        return "fakes_route"
    return None


def _fakes_post(module: _Module, test: _Function) -> Modelling | None:
    """Does the test, or a function of its module it calls, replace the client's `post`
    (`client.post = AsyncMock(...)`, `patch.object(client, "post", ...)`) or tell a mock client's
    `post` what to answer (`client.post.side_effect = [seeded, turn1, verified]`)? Then the fake
    answered the self-call too, in its turn, whatever route it was for."""
    for function in module.reached(test):
        for node in module.nodes(function):
            if isinstance(node, ast.Assign) and any(_sets_post(target) for target in node.targets):
                return "fakes_post"
            if (
                isinstance(node, ast.Call)
                and _called_name(node) in ("object", "setattr")
                and any(isinstance(a, ast.Constant) and a.value == "post" for a in node.args[1:2])
            ):
                return "fakes_post"
    return None


def _sets_post(target: ast.expr) -> bool:
    """`client.post = ...`, or what a mock's `post` answers: `client.post.side_effect = ...`,
    `client.post.return_value.json.return_value = ...`."""
    if isinstance(target, ast.Attribute) and target.attr == "post":
        return True
    while isinstance(target, ast.Attribute):
        answers = target.attr in ("side_effect", "return_value")
        if answers and isinstance(target.value, ast.Attribute) and target.value.attr == "post":
            return True
        target = target.value
    return False


def _relies_on_emulated_middleware(module: _Module, test: _Function, route: str) -> Modelling | None:
    """Does the test serve the agent's app as `setup_webserver()` builds it, without the exception
    middleware that its fake of the self-call emulated, and check the error text?

    Such a fake answers the route with the middleware's 500 (it catches what the handler raised
    and answers 500 with its text); the self-call now goes through the app the test serves, which
    answers the same failure with a plain 500 that carries no exception text.
    """
    reached = module.reached(test)
    calls = {_called_name(n) for f in reached for n in module.calls(f)}
    if "setup_webserver" not in calls or "setup_exception_middleware" in calls:
        return None
    if not any(_answers_500_on_error(f, route) for f in reached) or not _asserts_text(test):
        return None
    return "middleware"


def _answers_500_on_error(function: _Function, route: str) -> bool:
    """A branch keyed on the route that catches an exception and answers 500."""
    return any(
        isinstance(branch, ast.If)
        and _mentions(branch.test, route)
        and any(
            isinstance(handler, ast.ExceptHandler)
            and any(isinstance(n, ast.Constant) and n.value == 500 for n in ast.walk(handler))
            for statement in branch.body
            for handler in ast.walk(statement)
        )
        for branch in ast.walk(function)
    )


def _asserts_text(test: _Function) -> bool:
    """`assert "some text" in message`."""
    return any(
        isinstance(node, ast.Assert)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Constant)
        and isinstance(node.test.left.value, str)
        and isinstance(node.test.ops[0], ast.In)
        for node in ast.walk(test)
    )


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _is_mock_assertion(node: ast.AST) -> bool:
    """`mock.assert_called_once_with(...)` and the like."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("assert_")
    )


def _is_endswith(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "endswith"
    )


def _mentions(node: ast.AST, route: str) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(route)
        for n in ast.walk(node)
    )
