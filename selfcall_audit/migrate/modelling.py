"""How a test models the HTTP self-call `fix` removed. A test is named when it exercises a
rewritten method (calls `agent.run(...)`, not `asyncio.run(...)`, or posts to `/run` through a test
client) and its own body mentions the route, or it (or a function of its module it calls) replaces
the client's `post`, whose fake then answered the self-call in its turn (`side_effect=[seed, model,
verify]`). A test is also named when it serves the agent's app as `setup_webserver()` builds it,
without the exception middleware that its fake of the self-call emulated, and checks an error's
text. (`test_impact` finds the test modules to ask.)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Literal

    # How a test models the HTTP self-call (`report.messages.modelled` words it): "fakes_and_asserts"
    # (fakes the client's post for the route and asserts what the self-call posted), "asserts"
    # (asserts it went through the client), "fakes_route" (fakes the client's post for the route),
    # "fakes_post" (fakes the client's post, which answered the self-call too), "middleware"
    # (serves the app without the exception middleware its fake of the route emulated).
    Modelling = Literal["fakes_and_asserts", "asserts", "fakes_route", "fakes_post", "middleware"]

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef


def how_modelled(module: ModuleFunctions, test: Function, route: str, exercised: bool) -> Modelling | None:
    """How `test` models the self-call to `route`, or None: `exercised`, whether it exercises a
    rewritten method (see `Exercises`), decides whether its fakes and assertions are read."""
    found = (_models_self_call(test, route) or _fakes_post(module, test)) if exercised else None
    return found or _relies_on_emulated_middleware(module, test, route)


class ModuleFunctions:
    """A test module's functions, each walked once however many tests reach it (a test file's
    hundred tests share a few fixtures and helpers)."""

    def __init__(self, tree: ast.Module):
        self.defined: dict[str, list[Function]] = {}
        for node in ast.walk(tree):
            if isinstance(node, FUNCTIONS):
                self.defined.setdefault(node.name, []).append(node)
        # What a call by name can reach: the module's functions and its classes' methods (nested
        # functions are part of the function that defines them).
        self.callable: dict[str, list[Function]] = {}
        for node in tree.body:
            for item in node.body if isinstance(node, ast.ClassDef) else [node]:
                if isinstance(item, FUNCTIONS):
                    self.callable.setdefault(item.name, []).append(item)
        self._nodes: dict[Function, list[ast.AST]] = {}
        self._reached: dict[Function, list[Function]] = {}
        # the names `import` statements bind (see `Exercises._of_a_module`)
        self.modules = {
            alias.asname or alias.name.partition(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }

    def nodes(self, function: Function) -> list[ast.AST]:
        if function not in self._nodes:
            self._nodes[function] = list(ast.walk(function))
        return self._nodes[function]

    def calls(self, function: Function) -> Iterator[ast.Call]:
        return (node for node in self.nodes(function) if isinstance(node, ast.Call))

    def reached(self, function: Function) -> list[Function]:
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


class Exercises:
    """Does a test exercise a rewritten method: call it (`agent.run(...)`), post to its route
    (`client.post("/run")`), or call a function or method of the test module that does?"""

    def __init__(self, module: ModuleFunctions, methods: set[str]):
        self.module = module
        self.methods = methods
        self.routes = {f"/{method}" for method in methods}
        self.memo: dict[str, bool] = {}

    def exercises(self, function: Function) -> bool:
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


def _fakes_post(module: ModuleFunctions, test: Function) -> Modelling | None:
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


def _relies_on_emulated_middleware(module: ModuleFunctions, test: Function, route: str) -> Modelling | None:
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


def _answers_500_on_error(function: Function, route: str) -> bool:
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


def _asserts_text(test: Function) -> bool:
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
