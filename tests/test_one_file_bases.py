"""A scan of one file reports on the bases and mixins of the agents that file can change: what the
whole scan reports for that file, JSON object for JSON object (merged evidence and the agent it
names first included), and without loading the project's other agents when those bases find
nothing for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BASE = """\
class SimpleResponsesAPIAgent:
    pass
"""
MIXIN = """\
class LoopbackMixin:
    LOOPBACK_PATH = "/v1/health"

    async def ping(self, body: dict) -> dict:
        response = await self.server_client.post(  # SCA001 SCA002
            server_name=self.config.name, url_path=self.LOOPBACK_PATH, json=body
        )
        return await response.json()
"""
PATHS = """\
LOOPBACK = "/v1/responses"
"""
ECHO = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.loopback import LoopbackMixin

from responses_api_agents.echo_agent.paths import LOOPBACK


class EchoAgent(LoopbackMixin, SimpleResponsesAPIAgent):
    LOOPBACK_PATH = LOOPBACK
"""
RELAY = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.loopback import LoopbackMixin


class RelayAgent(LoopbackMixin, SimpleResponsesAPIAgent):
    LOOPBACK_PATH = "/v1/responses"
"""
PLAIN = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.loopback import LoopbackMixin


class {name}(LoopbackMixin, SimpleResponsesAPIAgent):
    pass
"""
FILLERS = 12


def _project(root: Path) -> Path:
    """Agents running one mixin: EchoAgent (its loopback path a constant of a module of its own)
    and RelayAgent post to their own `/v1/responses` through it; PlainAgent and the fillers leave
    the mixin's path as it is, `/v1/health`, and run it alike: the first of them in path order,
    Filler0, stands for the others."""
    files = {
        "pyproject.toml": "[project]\nname = 'p'\n",
        "nemo_gym/base_responses_api_agent.py": BASE,
        "nemo_gym/loopback.py": MIXIN,
        "responses_api_agents/echo_agent/paths.py": PATHS,
        "responses_api_agents/echo_agent/app.py": ECHO,
        "responses_api_agents/relay_agent/app.py": RELAY,
        "responses_api_agents/plain_agent/app.py": PLAIN.format(name="PlainAgent"),
        **{
            f"responses_api_agents/filler_{n}/app.py": PLAIN.format(name=f"Filler{n}") for n in range(FILLERS)
        },
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _scan(cli, *args: object) -> dict:
    return json.loads(cli("scan", "--format", "json", *args).stdout)


def _shown_for(report: dict, rel: str) -> list[dict]:
    """The findings of a whole scan that a scan of `rel` shows: located there, or with evidence there."""
    return [f for f in report["findings"] if f["path"] == rel or any(e["path"] == rel for e in f["evidence"])]


def test_a_mixin_is_reported_for_each_way_its_agents_run_it(cli, tmp_path: Path) -> None:
    """The agents overriding its path post to their own `/v1/responses` (SCA001); those leaving it
    post to their own `/v1/health` (SCA002), although the first agent running it overrides it."""
    root = _project(tmp_path)

    found = [(f["code"], f["path"], f["line"], f["agent"]) for f in _scan(cli, root)["findings"]]

    assert found == [
        ("SCA001", "nemo_gym/loopback.py", 5, "EchoAgent"),
        ("SCA002", "nemo_gym/loopback.py", 5, "Filler0"),
    ]


@pytest.mark.parametrize(
    ("rel", "agents"),
    [
        ("responses_api_agents/echo_agent/app.py", ["EchoAgent"]),
        # not the first agent the finding names: it still shows the whole scan's merged finding
        ("responses_api_agents/relay_agent/app.py", ["EchoAgent"]),
        # no agent there: the agent importing it runs the mixin with its constant
        ("responses_api_agents/echo_agent/paths.py", ["EchoAgent"]),
        ("responses_api_agents/plain_agent/app.py", []),
    ],
)
def test_a_scan_of_one_file_shows_the_whole_scans_mixin_findings_for_it_before_and_after_an_edit(
    cli, tmp_path: Path, rel: str, agents: list[str]
) -> None:
    root = _project(tmp_path)
    whole = _scan(cli, root)
    expected = _shown_for(whole, rel)
    assert [(f["code"], f["path"], f["line"], f["agent"]) for f in expected] == [
        ("SCA001", "nemo_gym/loopback.py", 5, agent) for agent in agents
    ]
    if expected:  # one finding for the site, its evidence merged across the two agents
        assert {e["path"] for e in expected[0]["evidence"]} >= {
            "responses_api_agents/echo_agent/app.py",
            "responses_api_agents/echo_agent/paths.py",
            "responses_api_agents/relay_agent/app.py",
        }

    assert _scan(cli, root / rel)["findings"] == expected

    (root / rel).write_text("_EDITED = 1\n" + (root / rel).read_text())
    edited = _scan(cli, root / rel)  # the cache holds the whole scan's facts: the edited file is new
    assert edited["findings"] == _shown_for(_scan(cli, root, "--no-cache"), rel)
    assert [f["line"] for f in edited["findings"]] == [5] * len(agents)


VERIFYING_BASE = """\
class SimpleResponsesAPIAgent:
    async def verify(self, body: dict) -> dict:
        response = await self.server_client.post(
            server_name=self.config.resources_server.name, url_path="/verify", json=body
        )
        return await response.json()
"""
AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class {name}(SimpleResponsesAPIAgent):
    async def responses(self, body: dict) -> dict:
        return await self.verify(body)
"""


def test_a_scan_of_an_agent_file_whose_base_finds_nothing_for_it_loads_no_other_agent(
    cli, tmp_path: Path
) -> None:
    """The base posts (to a resources server), so a whole scan evaluates it with every agent; for
    the scan of one agent's file only that agent can make a finding there shown, and it makes none:
    the file and its base are all the scan parses, not the other agents naming the base."""
    files = {
        "pyproject.toml": "[project]\nname = 'p'\n",
        "nemo_gym/base_responses_api_agent.py": VERIFYING_BASE,
        **{f"responses_api_agents/agent_{n}/app.py": AGENT.format(name=f"Agent{n}") for n in range(FILLERS)},
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    report = _scan(cli, tmp_path / "responses_api_agents/agent_3/app.py", "--no-cache")

    assert report["findings"] == [] == _scan(cli, tmp_path, "--no-cache")["findings"]
    assert report["summary"]["files_parsed"] == 2


SUBCLASS = """\
from responses_api_agents.{parent_folder}.app import {parent}


class {name}({parent}):
{body}
"""


@pytest.mark.parametrize("rel", ["nemo_gym/loopback.py", "responses_api_agents/echo_agent/app.py"])
def test_a_scan_of_one_file_follows_agents_subclasses_in_files_that_name_only_their_parent(
    cli, tmp_path: Path, rel: str
) -> None:
    """GrandAgent subclasses PlainAgent and GreatAgent GrandAgent, each in a file naming only its
    parent (a subclass's file names its direct base, not the mixin two or three levels up), and
    GreatAgent points the mixin's path at its own `/v1/responses`: the scan of the mixin's file
    shows the whole scan's finding, GreatAgent's file in its evidence; so does the scan of another
    agent's file, whose finding the mixin's agents share."""
    root = _project(tmp_path)
    for name, parent, body in (
        ("GrandAgent", "PlainAgent", "    pass"),
        ("GreatAgent", "GrandAgent", '    LOOPBACK_PATH = "/v1/responses"'),
    ):
        folder = root / "responses_api_agents" / name.replace("Agent", "_agent").lower()
        folder.mkdir()
        parent_folder = parent.replace("Agent", "_agent").lower()
        (folder / "app.py").write_text(
            SUBCLASS.format(name=name, parent=parent, parent_folder=parent_folder, body=body)
        )

    expected = _shown_for(_scan(cli, root), rel)
    assert "responses_api_agents/great_agent/app.py" in {e["path"] for f in expected for e in f["evidence"]}

    assert _scan(cli, root / rel, "--no-cache")["findings"] == expected
