"""The fixability check parses only the lines of the method around a call, where they stand: it
finds the call where the module's tree has it and answers as the module's tree does, and an
answer that needs the rest of the module (a global's bindings, the helper's name bound there)
says so, to be asked of the whole tree."""

from __future__ import annotations

import ast

import pytest

from selfcall_audit.analysis import around, names, reaching
from selfcall_audit.analysis.extract import extract
from selfcall_audit.ftypes import CallArgument, CallDescription, CallReceiver

SOURCE = '''\
"""An agent in an `if` block, decorated methods, a string whose lines start at column 0."""
import functools

ROUTE = "/v1/responses"
OWN = "agent"


if ROUTE:
    class Agent:
        @functools.cache
        @staticmethod
        def cached():
            return 1

        async def run(self, body):
            note = """
a line at column 0
"""
            return await self.server_client.post(server_name=OWN, url_path=ROUTE, json=body)

        async def plain(self, body):
            self = body
            return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses")
'''
DESCRIPTION = CallDescription(
    receiver=CallReceiver("self_attribute", "post", "self.server_client.post"),
    arguments=(
        CallArgument(0, "server_name", "server_name"),
        CallArgument(1, "url_path", "url_path"),
        CallArgument(2, "other", "json"),
    ),
    self_name="self",
)


def _method(name: str):
    (agent,) = extract("app.py", SOURCE.encode()).classes
    return next(m for m in agent.methods if m.name == name)


def _call_in(name: str) -> tuple[int, int]:
    """The line and 1-based column of the client call in method `name`."""
    span = _method(name).span
    for number in range(span[0], span[1] + 1):
        line = SOURCE.splitlines()[number - 1]
        if "self.server_client.post" in line:
            return number, line.index("self.server_client.post") + 1
    raise AssertionError(name)


def test_a_method_spans_its_decorators_and_its_last_line() -> None:
    lines = SOURCE.splitlines()
    first, last = _method("cached").span
    assert lines[first - 1].strip() == "@functools.cache"
    assert lines[last - 1].strip() == "return 1"
    first, last = _method("run").span
    assert lines[first - 1].strip() == "async def run(self, body):"
    assert "server_name=OWN" in lines[last - 1]


@pytest.mark.parametrize("name", ["run", "plain"])
def test_the_method_tree_finds_the_call_where_the_module_tree_has_it(name: str) -> None:
    line, column = _call_in(name)
    whole = around.Tree(SOURCE.encode()).call_at(line, column)
    part = around.Tree(SOURCE.encode(), _method(name).span).call_at(line, column)
    assert whole is not None and part is not None
    assert ast.dump(part[0], include_attributes=True) == ast.dump(whole[0], include_attributes=True)


def test_an_answer_of_the_method_alone_is_the_module_trees() -> None:
    line, column = _call_in("plain")  # `self` rebound in the method: read from its lines alone
    part = around.Tree(SOURCE.encode(), _method("plain").span)
    answer = around.site_blocker(part, line, column, DESCRIPTION, "")
    assert answer == around.site_blocker(around.Tree(SOURCE.encode()), line, column, DESCRIPTION, "")
    assert answer is not None and answer.kind == "self_rebound"
    assert not part.read_module


def test_a_global_read_by_the_removed_parts_needs_the_module() -> None:
    line, column = _call_in("run")  # `server_name=OWN`, which the call loses: the module binds it
    part = around.Tree(SOURCE.encode(), _method("run").span)
    around.site_blocker(part, line, column, DESCRIPTION, "")
    assert part.read_module


def test_the_helper_named_in_the_file_needs_the_module() -> None:
    source = SOURCE.replace(
        "import functools", "import functools\nfrom nemo_gym.inprocess import responses_in_process"
    )
    line, column = _call_in("plain")
    part = around.Tree(source.encode(), (_method("plain").span[0] + 1, _method("plain").span[1] + 1))
    around.site_blocker(part, line + 1, column, DESCRIPTION, "")
    assert part.read_module


def test_lines_that_are_no_method_are_refused() -> None:
    with pytest.raises(ValueError):
        around.Tree(SOURCE.encode(), (1, 3))


SCOPES = """\
async def run(self, body, *rest, key=None, **extra):
    def inner(self):
        return self

    handle = lambda body: body
    items = [body for body in rest]
    return inner, handle, items, (key := 1), extra
"""


@pytest.mark.parametrize("name", ["self", "body", "rest", "key", "extra", "inner", "handle", "absent"])
def test_a_functions_own_bindings_of_a_name_are_those_a_search_of_its_scope_finds(name: str) -> None:
    """The search is skipped where only a parameter can bind the name: it must not change what
    is found, whether nested scopes bind the name too (`self`, `body`) or not."""
    function = ast.parse(SCOPES).body[0]
    flows = reaching.Flows(ast.Module(body=[function], type_ignores=[]))

    found = flows.own(function, name)

    assert found == [n for n in names.bindings(function, name, own_scope=True) if n is not function]
    assert found or name == "absent"
