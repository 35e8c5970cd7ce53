"""The rewrite's reaching definitions (`migrate.flow`): a name the function's body never binds is
not searched for in each of its parts, and skipping that search changes nothing."""

from __future__ import annotations

import libcst as cst
import pytest

from selfcall_audit.migrate import flow

SCOPES = """\
async def run(self, body, *rest, key=None, **extra):
    @register(hook := body)
    def inner(self):
        return self

    handle = lambda body: body
    items = [body for body in rest]
    for item in items:
        with open(item) as stream:
            stream.read()
    try:
        pass
    except ValueError as error:
        raise
    return inner, handle, items, (key := 1), extra, hook
"""
NAMES = [
    "self",
    "body",
    "rest",
    "key",
    "extra",
    "inner",
    "hook",
    "handle",
    "item",
    "stream",
    "error",
    "absent",
]


def searched_part_by_part(function: cst.FunctionDef, name: str) -> dict[cst.CSTNode, flow.State]:
    """The states a flow finds searching every statement, header and block for the name."""
    every_part = flow._Flow(name, bound=True)
    params = [p for p in flow.bindings(function.params, name) if isinstance(p, cst.Param)]
    every_part.block(function.body, frozenset(params) if params else frozenset({flow._UNBOUND}))
    return every_part.states


@pytest.mark.parametrize("name", NAMES)
def test_a_flow_finds_what_searching_every_part_finds(name: str) -> None:
    """`hook` is bound only by a `:=` in a nested function's decorator, which runs in `run`'s own
    scope but lies where a search of that scope does not look: the body is searched whole."""
    module = cst.parse_module(SCOPES)
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)

    states, _ = flow.Flows(module, lambda node: 0).flow(function, name)

    assert states == searched_part_by_part(function, name)


METHOD = """\
async def run(self, body):
    first = self.a
    for item in body:
        if item:
            self.b(item)
    with self.c() as stream:
        stream.read()
    return first
"""


def test_a_name_the_body_never_binds_costs_one_search(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cst.parse_module(METHOD)
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    searched: list[cst.CSTNode] = []
    search = flow.bindings

    def counted(node: cst.CSTNode, name: str, own_scope: bool = False) -> list[cst.CSTNode]:
        searched.append(node)
        return search(node, name, own_scope)

    monkeypatch.setattr(flow, "bindings", counted)

    flow.Flows(module, lambda node: 0).flow(function, "self")

    assert searched == [function.body, function.params]
