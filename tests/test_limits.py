"""The analysis' bounds are said when reached, never silent: a call whose target or path the
analysis stopped following at one of its limits (`analysis/limits.py`) is reported when it could
still be a self-call, as SCA003 naming the limit, or as what it is when the target is the agent's
own. Each source is generated past one limit; the reported line carries its `# SCA00N`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_main
from fixture_annotations import annotations

from selfcall_audit.analysis.limits import LIMITS

HEADER = """\
import enum
import os

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
"""


def _agent(body: str, module: str = "") -> str:
    return f"{HEADER}{module}\n\nclass LimitAgent(SimpleResponsesAPIAgent):\n{body}"


def _server_through_methods(hops: int) -> str:
    """The agent's own name returned through `hops` methods, each calling the next; the path is
    another route, so only the target decides whether it is a self-call."""
    methods = "".join(f"    def name{n}(self):\n        return self.name{n + 1}()\n\n" for n in range(hops))
    note = "# SCA003" if hops > LIMITS.evaluation_depth else "# SCA002"
    return _agent(
        f"{methods}    def name{hops}(self):\n        return self.config.name\n\n"
        "    async def run(self, body):\n"
        f'        return await self.server_client.post(server_name=self.name0(), url_path="/run", json=body)  {note}\n'
    )


def _path_through_functions(hops: int) -> str:
    """`/v1/responses` returned through `hops` module functions, each calling the next, posted to
    a server named by the environment."""
    functions = "".join(f"\n\ndef route{n}():\n    return route{n + 1}()\n" for n in range(hops))
    return _agent(
        "    async def run(self, body):\n"
        '        return await self.server_client.post(server_name=os.environ["TARGET"], url_path=route0(), json=body)  # SCA003\n',
        module=f'{functions}\n\ndef route{hops}():\n    return "/v1/responses"\n',
    )


def _path_of_many_strings(parts: int) -> str:
    """A path joined from `parts` constants of two values each: 2**parts strings."""
    constants = "".join(f'\nA{n} = "/v1" if os.environ.get("F{n}") else "/v2"' for n in range(parts))
    joined = " + ".join(f"A{n}" for n in range(parts))
    return _agent(
        "    async def run(self, body):\n"
        f'        path = {joined} + "/responses"\n'
        '        return await self.server_client.post(server_name=os.environ["TARGET"], url_path=path, json=body)  # SCA003\n',
        module=constants + "\n",
    )


def _path_of_many_branches(branches: int) -> str:
    """A local bound to `branches` different paths, the last of them `/v1/responses`."""
    arms = "".join(f'        if kind == {n}:\n            path = "/other{n}"\n' for n in range(branches - 1))
    return _agent(
        "    async def run(self, body, kind):\n"
        '        path = "/v1/responses"\n'
        f"{arms}"
        '        return await self.server_client.post(server_name=os.environ["TARGET"], url_path=path, json=body)  # SCA003\n'
    )


def _path_nested(levels: int) -> str:
    """`/v1/responses` inside `levels` calls of `str`."""
    nested = "str(" * levels + '"/v1/responses"' + ")" * levels
    return _agent(
        "    async def run(self, body):\n"
        f'        return await self.server_client.post(server_name=os.environ["TARGET"], url_path={nested}, json=body)  # SCA003\n'
    )


def _path_rebound(times: int) -> str:
    """A local path rebound `times` times, each through `str` of the one before."""
    rebindings = "".join("        path = str(path)\n" for _ in range(times))
    return _agent(
        "    async def run(self, body):\n"
        '        path = "/v1/responses"\n'
        f"{rebindings}"
        '        return await self.server_client.post(server_name=os.environ["TARGET"], url_path=path, json=body)  # SCA003\n'
    )


def _path_of_many_segments(items: int) -> str:
    """`"/".join([...])` of `items` segments written in place, `responses` last."""
    segments = ", ".join(['""', '"v1"'] + ['"x"'] * (items - 3) + ['"responses"'])
    return _agent(
        "    async def run(self, body):\n"
        f'        path = "/".join([{segments}])\n'
        '        return await self.server_client.post(server_name=os.environ["TARGET"], url_path=path, json=body)  # SCA003\n'
    )


def _method_through_constants(hops: int) -> str:
    """`client.request(..., method=METHOD0)` to the agent's own name and route, `METHOD0` bound to
    `METHOD1` and so on through `hops` module constants, the last an Enum member `Method.POST`:
    only the method decides whether the call reaches the agent's `POST /v1/responses`."""
    constants = "".join(f"\nMETHOD{n} = METHOD{n + 1}" for n in range(hops))
    note = "# SCA003" if hops > LIMITS.evaluation_depth else "# SCA001"
    return _agent(
        "    async def run(self, body):\n"
        f'        return await self.server_client.request(server_name=self.config.name, url_path="/v1/responses", method=METHOD0, json=body)  {note}\n',
        module=f'\nclass Method(enum.Enum):\n    POST = "POST"\n\n\nMETHOD{hops} = Method.POST{constants}\n',
    )


# source past the limit, the limit named, and whether a source just within it resolves the call
PAST_A_LIMIT = {
    "server_through_methods": (_server_through_methods(LIMITS.evaluation_depth + 5), "evaluation_depth"),
    "path_through_functions": (_path_through_functions(LIMITS.evaluation_depth + 5), "evaluation_depth"),
    "path_of_many_strings": (_path_of_many_strings(5), "alternatives"),
    "path_of_many_branches": (_path_of_many_branches(LIMITS.fact_alternatives + 2), "fact_alternatives"),
    "path_nested": (_path_nested(LIMITS.fact_depth + 2), "fact_depth"),
    "path_rebound": (_path_rebound(LIMITS.inlined_depth + 10), None),
    "path_of_many_segments": (_path_of_many_segments(LIMITS.sequence_items + 4), "sequence_items"),
    "method_through_constants": (_method_through_constants(LIMITS.evaluation_depth + 5), "evaluation_depth"),
}


def _scan(tmp_path: Path, source: str, *select: str) -> dict:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "limits"\n')
    app = tmp_path / "responses_api_agents" / "limit_agent" / "app.py"
    app.parent.mkdir(parents=True)
    app.write_text(source)
    args = ["scan", str(tmp_path), "--no-cache", "--format", "json", *select]
    return json.loads(run_main(args).stdout)


@pytest.mark.parametrize("shape", sorted(PAST_A_LIMIT))
def test_a_call_cut_by_a_limit_is_reported_with_the_limit(tmp_path: Path, shape: str) -> None:
    source, limit = PAST_A_LIMIT[shape]
    report = _scan(tmp_path, source, "--select", "SCA001,SCA002,SCA003")

    found = [(f["line"], f["code"]) for f in report["findings"]]
    assert found == annotations(source)
    # a chain of methods is also a chain of possible helpers, whose cut is said too
    assert [e["message"].split(":")[0] for e in report["errors"]] == (
        [f"helpers forward a server-client call more than {LIMITS.helper_depth} deep"]
        if shape == "server_through_methods"
        else []
    )
    (finding,) = report["findings"]
    if limit is not None:
        assert finding["limit"] == limit
    else:  # cut where the substituted locals or the evaluation of them reach their bound first
        assert finding["limit"] in ("inlined_depth", "evaluation_depth")
    assert "the analysis stopped at its limit of " in finding["message"]


@pytest.mark.parametrize(
    "source",
    [
        _server_through_methods(LIMITS.evaluation_depth - 5),
        _path_through_functions(LIMITS.evaluation_depth - 5),
        _method_through_constants(LIMITS.evaluation_depth - 5),
    ],
    ids=["server_through_methods", "path_through_functions", "method_through_constants"],
)
def test_a_call_within_the_limits_is_resolved_and_names_no_limit(tmp_path: Path, source: str) -> None:
    report = _scan(tmp_path, source, "--select", "SCA001,SCA002,SCA003")

    assert [(f["line"], f["code"]) for f in report["findings"]] == annotations(source)
    assert all("limit" not in f for f in report["findings"])
    assert all("stopped at its limit" not in f["message"] for f in report["findings"])


def test_the_limit_is_said_in_every_format(tmp_path: Path) -> None:
    source, _ = PAST_A_LIMIT["server_through_methods"]
    _scan(tmp_path, source)
    done = run_main(["scan", str(tmp_path), "--no-cache", "--format", "concise", "--select", "SCA003"])

    assert done.exit_code == 1
    assert (
        f"the analysis stopped at its limit of {LIMITS.evaluation_depth} names, constants and calls "
        "followed for one value" in done.stdout
    )


@pytest.mark.parametrize("modules", [LIMITS.import_depth - 5, LIMITS.import_depth + 5])
def test_a_name_re_exported_past_the_limit_is_an_entry_where_the_chain_is_cut(
    tmp_path: Path, modules: int
) -> None:
    """`/v1/responses` imported through `modules` modules, each re-exporting the next one's."""
    routes = tmp_path / "routes"
    routes.mkdir()
    (routes / "__init__.py").write_text("")
    for n in range(modules):
        (routes / f"m{n}.py").write_text(f"from routes.m{n + 1} import ROUTE\n\n__all__ = ['ROUTE']\n")
    (routes / f"m{modules}.py").write_text('ROUTE = "/v1/responses"\n')
    source = _agent(
        "    async def run(self, body):\n"
        '        return await self.server_client.post(server_name=os.environ["TARGET"], url_path=ROUTE, json=body)  # SCA003\n',
        module="from routes.m0 import ROUTE\n",
    )

    report = _scan(tmp_path, source, "--select", "SCA003")

    entries = [(e["path"], e["line"], e["column"], e["message"]) for e in report["errors"]]
    if modules <= LIMITS.import_depth:
        assert [(f["line"], f["code"]) for f in report["findings"]] == annotations(source)
        assert entries == []
    else:
        cut = f"routes/m{LIMITS.import_depth}.py"  # its import of the next one is not followed
        assert entries == [
            (
                cut,
                1,
                1,
                f"`ROUTE` is re-exported through more than {LIMITS.import_depth} modules: it was not "
                "followed further (a self-call through it is not reported)",
            )
        ]


@pytest.mark.parametrize("aliases", [LIMITS.import_depth, LIMITS.import_depth + 1])
def test_a_base_class_aliased_past_the_limit_is_an_entry_where_the_chain_is_cut(
    tmp_path: Path, aliases: int
) -> None:
    """The agent's base named through `aliases` module aliases (`AgentBase = m1.AgentBase` in
    `m0`, and so on, the last one `AgentBase = SimpleResponsesAPIAgent`)."""
    bases = tmp_path / "bases"
    bases.mkdir()
    (bases / "__init__.py").write_text("")
    for n in range(aliases - 1):
        (bases / f"m{n}.py").write_text(f"from bases import m{n + 1}\n\nAgentBase = m{n + 1}.AgentBase\n")
    (bases / f"m{aliases - 1}.py").write_text(
        "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\n"
        "AgentBase = SimpleResponsesAPIAgent\n"
    )
    source = (
        "from bases import m0\n\n\n"
        "class LimitAgent(m0.AgentBase):\n"
        '    """A SimpleResponsesAPIAgent through its alias."""\n\n'
        "    async def run(self, body):\n"
        '        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)  # SCA001\n'
    )

    report = _scan(tmp_path, source)

    entries = [(e["path"], e["line"], e["message"]) for e in report["errors"]]
    if aliases <= LIMITS.import_depth:
        assert [(f["line"], f["code"]) for f in report["findings"]] == annotations(source)
        assert entries == []
    else:  # the agent is not seen, and the run says where it stopped following its base (the
        # alias at line 3 of every module)
        assert report["findings"] == []
        assert entries == [
            (
                f"bases/m{LIMITS.import_depth}.py",
                3,
                f"`AgentBase` is re-exported through more than {LIMITS.import_depth} modules: it was "
                "not followed further (a self-call through it is not reported)",
            )
        ]


def test_a_limit_kept_in_the_facts_is_kept_by_the_cache(tmp_path: Path) -> None:
    """The facts cache stores a value cut at `fact_alternatives` as cut: a warm scan says it too."""
    source, limit = PAST_A_LIMIT["path_of_many_branches"]
    _scan(tmp_path, source)
    args = ["scan", str(tmp_path), "--format", "json", "--select", "SCA003"]

    cold = json.loads(run_main(args).stdout)["findings"]
    warm = json.loads(run_main(args).stdout)["findings"]

    assert (tmp_path / ".selfcall_audit_cache").is_dir()
    assert [f["limit"] for f in cold] == [f["limit"] for f in warm] == [limit]


@pytest.mark.parametrize("shape", sorted(PAST_A_LIMIT))
def test_a_default_scan_says_where_the_analysis_stopped_at_a_limit(tmp_path: Path, shape: str) -> None:
    """SCA003 is off by default: the call it would report is an SCA900 entry at its line instead,
    a warning that does not fail the gate (as other entries, unless --strict)."""
    source, _ = PAST_A_LIMIT[shape]
    (line, code), *_ = annotations(source)
    report = _scan(tmp_path, source)

    stops = [
        (e["line"], e["severity"]) for e in report["errors"] if "stopped following this call" in e["message"]
    ]
    if code == "SCA003":
        assert report["findings"] == []
        assert stops == [(line, "warning")]
    else:  # reported as what it is: said by the finding itself
        assert [f["line"] for f in report["findings"]] == [line]
        assert stops == []
