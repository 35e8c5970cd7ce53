"""The rewrite changes the calls it rewrites and adds the helper's import: nothing else, whatever
surrounds them; and reading only part of the file (`region`) gives the bytes a whole reading does.

Modules are generated: imports, functions and classes of ordinary code (loops, handlers, nested
functions, `global`, strings holding quotes), and an agent class whose methods hold self-calls in
several forms among ordinary methods. Each is parsed with `ast` before and after the rewrite;
with each rewritten call put back in the form it must take and the helper's import left out,
the two module trees must be equal.
"""

from __future__ import annotations

import ast
import textwrap
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selfcall_audit.ftypes import Finding
from selfcall_audit.migrate import rewrite
from selfcall_audit.migrate.imports import Helper
from selfcall_audit.migrate.rewrite import rewrite_source
from selfcall_audit.rules import SELF_CALL

HELPER = Helper("selfcall_audit.inprocess", "responses_in_process")
PATH = "responses_api_agents/x/app.py"
NAMES = ("target", "config", "limit", "handle", "responses_in_process", "AGENT")
STATEMENTS = (
    "total = {n}",
    "for item in items:\n    total = item + {n}",
    "if items:\n    limit = {n}\nelse:\n    limit = -{n}",
    "try:\n    values = [x * 2 for x in items if x]\nexcept ValueError as exc:\n    raise RuntimeError(str(exc)) from exc",
    "with open('data_{n}.txt') as handle:\n    text = handle.read()",
    "def inner():\n    return {name}",
    "{name} = {n}",
    'note = """holds \\"\\"\\" and {name}"""',
    "lambda_{n} = lambda {name}: {name} + 1",
)
CALLS = (  # the call, and what it must become
    (
        'response = await self.server_client.post(\n    server_name=self.config.name,\n    url_path="/v1/responses",\n    json=body,\n)',
        'response = await responses_in_process(self, url_path="/v1/responses", json=body)',
    ),
    (
        'response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json={"input": "{n}"})',
        'response = await responses_in_process(self, url_path="/v1/responses", json={"input": "{n}"})',
    ),
    (
        'if body:\n    response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body, cookies=body)',
        'if body:\n    response = await responses_in_process(self, url_path="/v1/responses", json=body, cookies=body)',
    ),
    (
        'for _ in range({n}):\n    response = await self.server_client.post(url_path="/v1/responses", server_name=AGENT, json=body)',
        'for _ in range({n}):\n    response = await responses_in_process(self, url_path="/v1/responses", json=body)',
    ),
)


def block(lines: list[str], depth: int) -> str:
    return textwrap.indent("\n".join(lines) + "\n", "    " * depth)


@st.composite
def statements(draw: st.DrawFn) -> list[str]:
    chosen = draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=len(chosen), max_size=len(chosen)))
    body = [s.format(n=n, name=name) for n, (s, name) in enumerate(zip(chosen, names, strict=True))]
    if draw(st.booleans()):
        body.insert(0, f"global {draw(st.sampled_from(NAMES))}")
    return body


@st.composite
def modules(draw: st.DrawFn) -> tuple[str, str]:
    """A module, and the same module as the rewrite of every call must make it."""
    before: list[str] = ['"""A generated agent module."""', ""]
    before += sorted(draw(st.sets(st.sampled_from(("import json", "import os")))))
    before += ["from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent", ""]
    expected = list(before)
    for index, kind in enumerate(draw(st.lists(st.sampled_from(("def", "class", "value")), max_size=5))):
        if kind == "value":
            text = f"{draw(st.sampled_from(NAMES))} = {index}\n"
        elif kind == "def":
            text = f"\ndef helper_{index}(items):\n" + block(draw(statements()), 1)
        else:
            text = f"\nclass Filler{index}:\n    def method(self, items):\n" + block(draw(statements()), 2)
        before.append(text)
        expected.append(text)
    before.append("\nclass Agent(SimpleResponsesAPIAgent):")
    expected.append(before[-1])
    methods = draw(st.lists(st.booleans(), min_size=1, max_size=6))
    for index, calls in enumerate(methods):
        if not calls:
            text = f"    def tally_{index}(self, items):\n" + block(draw(statements()), 2)
            before.append(text)
            expected.append(text)
            continue
        call, rewritten = draw(st.sampled_from(CALLS))
        filler = block(draw(statements()), 2) if draw(st.booleans()) else ""
        head = f"    async def respond_{index}(self, body, items=()):\n{filler}"
        before.append(head + block([call.replace("{n}", str(index))], 2) + "        return response\n")
        expected.append(head + block([rewritten.replace("{n}", str(index))], 2) + "        return response\n")
    return "\n".join(before) + "\n", "\n".join(expected) + "\n"


def findings_of(source: str) -> list[Finding]:
    """An SCA001 finding for each `self.server_client.post(...)`, where the analysis reports it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "self.server_client.post":
            found.append(
                Finding(
                    SELF_CALL,
                    PATH,
                    node.lineno,
                    node.col_offset + 1,
                    node.end_lineno or node.lineno,
                    (node.end_col_offset or 0) + 1,
                    "Agent",
                    "run",
                    fixable=True,
                )
            )
    return found


def calls_of(tree: ast.Module, callee: str) -> list[ast.Call]:
    """The calls of `callee`, in the order they appear."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == callee]
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def without_helper_import(tree: ast.Module) -> ast.Module:
    """`tree` without the one top-level import of the helper the rewrite must have added."""
    imports = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and node.module == HELPER.module
        and [(alias.name, alias.asname) for alias in node.names] == [(HELPER.name, None)]
    ]
    assert len(imports) == 1, ast.unparse(tree)[:400]
    tree.body.remove(imports[0])
    return tree


@pytest.mark.slow  # 25 generated files each, rewritten and compared
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_a_rewrite_changes_only_the_rewritten_calls_and_adds_the_import(generated: tuple[str, str]) -> None:
    source, expected = generated
    findings = findings_of(source)

    after, outcomes, removed, _ = rewrite_source(source.encode(), findings, HELPER)

    assert removed == []
    if all(o.reason is not None for o in outcomes):
        assert after == source.encode()
        return
    # the expected module with each call the rewrite refused put back as it was
    refused = {(o.finding.line, o.finding.column - 1) for o in outcomes if o.reason is not None}
    originals = calls_of(ast.parse(source), "self.server_client.post")
    want = ast.parse(expected)
    back = {
        id(new): old
        for old, new in zip(originals, calls_of(want, HELPER.name), strict=True)
        if (old.lineno, old.col_offset) in refused
    }

    class PutBack(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            return back.get(id(node)) or self.generic_visit(node)

    assert ast.dump(without_helper_import(ast.parse(after.decode()))) == ast.dump(PutBack().visit(want))


@pytest.mark.slow  # 25 generated files each, rewritten and compared
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_reading_part_of_the_file_gives_what_reading_all_of_it_gives(generated: tuple[str, str]) -> None:
    source, _ = generated
    findings = findings_of(source)

    part = rewrite_source(source.encode(), findings, HELPER)
    with mock.patch.object(rewrite, "region", lambda *args: None):  # libcst reads the whole file
        whole = rewrite_source(source.encode(), findings, HELPER)

    assert part == whole
