"""The audited repo's tests that model the HTTP self-call `fix` just removed, named for the user.

Such a test fakes `server_client.post` for the agent's own `/v1/responses`, or asserts the posted
paths, server names or cookies of the self-call; after the rewrite that call no longer goes through
`server_client.post`, so the test may fail or hang although the agent is right. A test is named
when it exercises a rewritten method (calls `.run(...)`, or posts to `/run` through a test client)
and its own body mentions the route: precise enough that the list is worth reading.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..workspace.discovery import discover, test_code_matcher

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Rewritten:
    """A method whose self-call `fix` rewrote, in a root-relative file."""

    path: str
    method: str


@dataclass(frozen=True)
class ImpactedTest:
    """A test to update: its pytest node id, the line it starts on, and why."""

    node_id: str
    line: int
    reason: str


def impacted_tests(
    root: Path, rewritten: Iterable[Rewritten], route: str, exclude: tuple[str, ...] = ()
) -> list[ImpactedTest]:
    """Tests of the project that model the HTTP self-call of one of the `rewritten` methods."""
    by_file: dict[str, set[str]] = {}
    for item in rewritten:
        by_file.setdefault(item.path, set()).add(item.method)
    if not by_file:
        return []
    by_file = {path: _callers(root / path, methods) for path, methods in by_file.items()}
    files = discover(root, exclude, True, ())
    is_test = test_code_matcher()
    found: list[ImpactedTest] = []
    for rel in sorted(r for r in files.modules if r.endswith(".py") and is_test(r)):
        try:
            source = (root / rel).read_bytes()
        except OSError:
            continue
        methods = {m for path, names in by_file.items() if _tests_module(rel, source, path) for m in names}
        if not methods:
            continue
        try:
            tree = ast.parse(source, rel)
        except (SyntaxError, ValueError):
            continue
        found.extend(_impacted_in(rel, tree, methods, route))
    return found


def _callers(path: Path, methods: set[str]) -> set[str]:
    """The methods and every function of the module that calls one of them through `self.` (as
    `run` calls `_run_once`, which holds the self-call), transitively."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return methods
    calls = {
        node.name: {
            n.func.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _is_self(n.func.value)
        }
        for node in ast.walk(tree)
        if isinstance(node, _FUNCTIONS)
    }
    reaching = set(methods)
    while grown := {name for name, called in calls.items() if name not in reaching and called & reaching}:
        reaching |= grown
    return reaching


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _module_name(rel: str) -> str:
    parts = PurePosixPath(rel).with_suffix("").parts
    return ".".join(parts[1:] if parts[0] == "src" else parts)


def _tests_module(test: str, source: bytes, rewritten: str) -> bool:
    """Does the test sit in the rewritten module's folder (NeMo Gym: `<agent>/tests/`), or name it?"""
    folder = PurePosixPath(rewritten).parent
    if folder.parts and PurePosixPath(test).is_relative_to(folder):
        return True
    return _module_name(rewritten).encode() in source


def _impacted_in(rel: str, tree: ast.Module, methods: set[str], route: str) -> Iterator[ImpactedTest]:
    helpers = _Helpers(tree, methods)
    for node_id, function in _test_functions(rel, tree):
        if not helpers.exercises(function):
            continue
        reason = _models_self_call(function, route)
        if reason is not None:
            yield ImpactedTest(node_id, function.lineno, reason)


def _test_functions(rel: str, tree: ast.Module) -> Iterator[tuple[str, _Function]]:
    for node in tree.body:
        if isinstance(node, _FUNCTIONS) and node.name.startswith("test"):
            yield f"{rel}::{node.name}", node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, _FUNCTIONS) and item.name.startswith("test"):
                    yield f"{rel}::{node.name}::{item.name}", item


class _Helpers:
    """Does a test exercise a rewritten method: call it (`agent.run(...)`), post to its route
    (`client.post("/run")`), or call a function or method of the test module that does?"""

    def __init__(self, tree: ast.Module, methods: set[str]):
        self.methods = methods
        self.routes = {f"/{method}" for method in methods}
        self.defined: dict[str, list[_Function]] = {}
        for node in ast.walk(tree):
            if isinstance(node, _FUNCTIONS):
                self.defined.setdefault(node.name, []).append(node)
        self.memo: dict[str, bool] = {}

    def exercises(self, function: _Function) -> bool:
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in self.methods or any(
                isinstance(a, ast.Constant) and a.value in self.routes for a in node.args
            ):
                return True
            if name in self.defined and name != function.name and self._helper_exercises(name):
                return True
        return False

    def _helper_exercises(self, name: str) -> bool:
        if name not in self.memo:
            self.memo[name] = False  # a recursive helper does not exercise through itself
            self.memo[name] = any(self.exercises(f) for f in self.defined[name])
        return self.memo[name]


def _models_self_call(function: ast.AST, route: str) -> str | None:
    """Why the test's own body models the self-call over HTTP, or None."""
    checks = [n for n in ast.walk(function) if isinstance(n, ast.Assert) or _is_mock_assertion(n)]
    inside_checks = {id(n) for check in checks for n in ast.walk(check)}
    asserted = any(_mentions(check, route) for check in checks)
    faked = any(
        _mentions(n, route)
        for n in ast.walk(function)
        if id(n) not in inside_checks and (isinstance(n, (ast.Compare, ast.Dict)) or _is_endswith(n))
    )
    if asserted and faked:
        return f"fakes server_client.post for {route} and asserts the calls the self-call made"
    if asserted:
        return f"asserts that the self-call to {route} went through server_client.post"
    if faked:
        return f"fakes server_client.post for {route}, which the self-call no longer reaches"
    return None


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
