"""No input exhausts the interpreter's stack: long chains in a scanned file, a baseline or a YAML
config give findings or one clear error, never an internal RecursionError (scan, flake8 and the
pytest helper alike)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_flake8, run_main

from selfcall_audit.analysis import gym_config
from selfcall_audit.analysis.gym_config import ConfigSet
from selfcall_audit.testing import assert_no_self_calls

CHAIN = 1_000  # rebindings of one name: deeper than the interpreter's default stack of 1,000 frames
REBINDINGS = {
    "plain": "n = n",
    "conditional": "n = n if c else n",
    "walrus": "(n := n)",
}


def _rebinding_agent(line: str) -> str:
    body = "\n".join(f"        {line}" for _ in range(CHAIN))
    return f"""\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class ChainAgent(SimpleResponsesAPIAgent):
    async def run(self, body, c=True):
        n = self.config.name
{body}
        return await self.server_client.post(server_name=n, url_path="/v1/responses", json=body)  # SCA001
"""


CALL_LINE = 7 + CHAIN


@pytest.fixture
def chains(tmp_path: Path) -> Path:
    """One agent per shape of rebinding, each ending in a self-call through the rebound name."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "chains"\n')
    for shape, line in REBINDINGS.items():
        app = tmp_path / "responses_api_agents" / f"{shape}_agent" / "app.py"
        app.parent.mkdir(parents=True)
        app.write_text(_rebinding_agent(line))
    return tmp_path


def test_a_thousand_rebindings_are_followed_by_scan(chains: Path) -> None:
    done = run_main(["scan", str(chains), "--no-cache", "--format", "json"])

    assert done.exit_code == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["errors"] == []
    assert sorted((f["code"], f["path"], f["line"]) for f in report["findings"]) == [
        ("SCA001", f"responses_api_agents/{shape}_agent/app.py", CALL_LINE) for shape in sorted(REBINDINGS)
    ]


def test_a_thousand_rebindings_are_followed_by_the_pytest_helper(chains: Path) -> None:
    with pytest.raises(AssertionError) as caught:
        assert_no_self_calls(chains)

    for shape in REBINDINGS:
        assert f"responses_api_agents/{shape}_agent/app.py:{CALL_LINE}:" in str(caught.value)


def test_a_thousand_rebindings_are_followed_by_flake8(chains: Path) -> None:
    app = "responses_api_agents/walrus_agent/app.py"
    done = run_flake8(["--select", "SCA", app], chains)  # in-process: a deeper stack than flake8's own

    assert done.exit_code == 1, done.stderr
    assert done.stdout.startswith(f"./{app}:{CALL_LINE}:") or done.stdout.startswith(f"{app}:{CALL_LINE}:")
    assert "SCA001" in done.stdout and "Recursion" not in done.stdout + done.stderr


def test_a_baseline_nested_a_hundred_thousand_deep_is_a_clear_error(chains: Path) -> None:
    baseline = chains / "baseline.json"
    baseline.write_text("[" * 100_000)

    done = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan", "--baseline", str(baseline), str(chains)],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 2
    assert done.stderr.endswith(f"Error: {baseline} is not a selfcall-audit baseline (nested too deeply)\n")
    assert "internal error" not in done.stderr


CRITIC_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class CriticAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(  # SCA001: the YAML routes `critic` back to the agent
            server_name=self.config.critic.name, url_path="/v1/responses", json=body
        )
"""
SELF_CRITIC = """\
critic_agent:
  responses_api_agents:
    critic_agent:
      entrypoint: app.py
      critic:
        type: responses_api_agents
        name: critic_agent
"""


@pytest.mark.slow  # seconds to parse 0.9 MB of YAML
def test_a_large_yaml_file_without_aliases_is_read(tmp_path: Path) -> None:
    """300,000 items written out (0.9 MB, under the file size limit): only what aliases copy is
    bounded, not what a file holds."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "large"\n')
    agent = tmp_path / "responses_api_agents" / "critic_agent"
    (agent / "configs").mkdir(parents=True)
    (agent / "app.py").write_text(CRITIC_AGENT)
    items = ", ".join(["a"] * 300_000)
    (agent / "configs" / "critic_agent.yaml").write_text(f"{SELF_CRITIC}prompts: [{items}]\n")

    done = run_main(["scan", str(tmp_path), "--no-cache", "--format", "json"])

    report = json.loads(done.stdout)
    assert report["errors"] == []
    assert [(f["code"], f["path"], f["line"]) for f in report["findings"]] == [
        ("SCA001", "responses_api_agents/critic_agent/app.py", 6)
    ]


def _forwarding_agent(hops: int) -> str:
    """An agent whose self-call goes through `hops` module functions forwarding it one to the next."""
    helpers = "".join(
        f"\n\nasync def hop{n}(client, name, path, body):\n    return await hop{n + 1}(client, name, path, body)\n"
        for n in range(hops)
    )
    return f"""\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
{helpers}

async def hop{hops}(client, name, path, body):
    return await client.post(server_name=name, url_path=path, json=body)


class ForwardingAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await hop0(self.server_client, self.config.name, "/v1/responses", body)
"""


@pytest.mark.parametrize("hops", [20, 30])
def test_a_chain_of_forwarding_helpers_is_followed_or_said_to_be_cut(tmp_path: Path, hops: int) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "forwarding"\n')
    app = tmp_path / "responses_api_agents" / "forwarding_agent" / "app.py"
    app.parent.mkdir(parents=True)
    app.write_text(_forwarding_agent(hops))

    report = json.loads(run_main(["scan", str(tmp_path), "--no-cache", "--format", "json"]).stdout)

    found = [(f["code"], f["line"]) for f in report["findings"]]
    errors = [(e["path"], e["message"]) for e in report["errors"]]
    if hops <= 25:  # LIMITS.helper_depth
        assert (found, errors) == ([("SCA001", 4 * hops + 10)], [])  # the call in `run`
    else:
        assert found == []
        assert errors == [
            (
                "responses_api_agents/forwarding_agent/app.py",
                "helpers forward a server-client call more than 25 deep: hop25 and what it calls were "
                "not followed (a self-call there is not reported)",
            )
        ]


def test_dense_config_paths_cost_the_edges_and_a_missing_file_is_said_once(monkeypatch) -> None:
    """60 configs each chaining in all the others and one missing file: every namespace merges
    each document once (the merges grow with the edges, n², where merging whole namespaces into
    each other grew as n³), and the missing file is one error, not one per config naming it."""
    files = [f"configs/c{n:02d}.yaml" for n in range(60)]
    documents = {
        rel: "config_paths:\n"
        + "".join(f"  - {other}\n" for other in files if other != rel)
        + f"  - configs/missing.yaml\ninstance_{n}:\n  responses_api_agents:\n    x:\n      entrypoint: app.py\n"
        for n, rel in enumerate(files)
    }
    merges = [0]
    real_merge = gym_config._merge

    def counted_merge(base: object, override: object) -> object:
        merges[0] += 1
        return real_merge(base, override)

    monkeypatch.setattr(gym_config, "_merge", counted_merge)
    configs = ConfigSet(lambda rel: documents[rel].encode(), lambda rel: rel in documents)

    instances = configs.instances(tuple(files))

    assert sorted(i.name for i in instances) == sorted(f"instance_{n}" for n in range(60))
    assert merges[0] <= 4 * len(files) ** 2
    assert {path: error.message for path, error in configs.errors.items()} == {
        files[0]: "config_paths entry 'configs/missing.yaml' was not found (looked for configs/missing.yaml)"
    }
