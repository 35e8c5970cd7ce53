"""A rewrite never changes what a method does: each case's method run before and after `fix`.

The agent, its server client and the in-process helper are stubs that write down where each
request goes: a post to server `s` as `("post", s, path)`, and the helper called with agent `a`
as a post to `a`'s own name, which is what an in-process self-call stands for. The method must
leave the same record and return (or raise) the same thing after the rewrite as before it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
import types
from pathlib import Path

import pytest
from safety_support import APP, CASES, make_project

import selfcall_audit.inprocess

# Cases whose method can be run with the stubs below: the first ones are refused, since a rewrite
# would post elsewhere (or not raise), the last ones rewritten, since it cannot.
REFUSED = [
    "rebound_in_loop",
    "rebound_after_closure",
    "nonlocal_self",
    "nfkc_self",
    "nfkc_helper_name",
    "global_rebinding",
    "except_binding",
    "comprehension_walrus",
]
REWRITTEN = ["bound_before_loop", "closure_bound_once"]
BODY = {"attempts": "two", "candidates": ["policy_model", "other_model"]}


class _Response:
    def __init__(self, body: dict):
        self.body = body


class _Client:
    def __init__(self, trace: list):
        self.trace = trace

    async def post(self, server_name: str, url_path: str, json: object = None, **_: object) -> _Response:
        self.trace.append(("post", server_name, url_path))
        return _Response({"from": server_name})


class _Agent:
    def __init__(self, name: str, trace: list):
        self.config = types.SimpleNamespace(
            name=name, model_server=types.SimpleNamespace(name="policy_model")
        )
        self.server_client = _Client(trace)


async def _get_response_json(response: _Response) -> dict:
    return response.body


def _stub_modules(monkeypatch: pytest.MonkeyPatch, trace: list) -> None:
    """`nemo_gym` as the cases import it, and the helper, all writing to `trace`."""
    base = types.ModuleType("nemo_gym.base_responses_api_agent")
    base.SimpleResponsesAPIAgent = _Agent  # type: ignore[attr-defined]
    utils = types.ModuleType("nemo_gym.server_utils")
    utils.get_response_json = _get_response_json  # type: ignore[attr-defined]
    for module in (types.ModuleType("nemo_gym"), base, utils):
        monkeypatch.setitem(sys.modules, module.__name__, module)

    async def in_process(agent: _Agent, *, url_path: str, json: object = None, **_: object) -> _Response:
        trace.append(("post", agent.config.name, url_path))
        return _Response({"from": agent.config.name})

    monkeypatch.setattr(selfcall_audit.inprocess, "responses_in_process", in_process)


def _run(path: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list, object]:
    """Load the module at `path` and run its agent's `run`: what it posted, and what it returned
    (or the type of what it raised)."""
    trace: list = []
    _stub_modules(monkeypatch, trace)
    spec = importlib.util.spec_from_file_location(f"relay_{tag}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.RelayAgent("x_agent", trace)
    extra = [_Agent("peer_agent", trace)] if "peer" in inspect.signature(agent.run).parameters else []
    try:
        result: object = asyncio.run(agent.run(dict(BODY), *extra))
    except Exception as exc:  # the original may raise: the rewrite must raise the same
        result = type(exc)
    return trace, result


@pytest.mark.parametrize("name", REFUSED + REWRITTEN)
def test_the_method_does_the_same_after_fix(name: str, tmp_path: Path, cli, monkeypatch) -> None:
    root = make_project(tmp_path / "repo")
    app = root / APP
    app.write_bytes((CASES / name / "before.py").read_bytes())
    before = _run(app, "before", monkeypatch)

    cli("fix", "--no-cache", root)

    assert _run(app, "after", monkeypatch) == before
    assert (app.read_bytes() != (CASES / name / "before.py").read_bytes()) == (name in REWRITTEN)


def test_the_stubs_tell_a_self_call_from_a_call_elsewhere(tmp_path: Path, monkeypatch) -> None:
    """Guards the comparison: the looping case, rewritten by hand as the old `fix` did, is caught."""
    source = (CASES / "rebound_in_loop" / "before.py").read_text()
    rewritten = tmp_path / "app.py"
    rewritten.write_text(
        "from selfcall_audit.inprocess import responses_in_process\n"
        + source.replace("self.server_client.post(server_name=target, ", "responses_in_process(self, ")
    )

    assert _run(rewritten, "by_hand", monkeypatch) != _run(
        CASES / "rebound_in_loop" / "before.py", "b", monkeypatch
    )
