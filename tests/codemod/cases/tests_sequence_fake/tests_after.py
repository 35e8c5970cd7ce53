import json
from unittest.mock import patch

import pytest

from responses_api_agents.x.app import GraderAgent


async def _self_call_through_server_client(agent, **kwargs):
    """The agent's self-call, sent to its server client as before the migration."""
    return await agent.server_client.post(server_name=agent.config.name, **kwargs)


class _Answer:
    ok = True
    cookies: dict = {}

    def __init__(self, payload: dict) -> None:
        self.payload = payload

    async def read(self) -> bytes:
        return json.dumps(self.payload).encode()


class _Client:
    """Answers in turn: seed, then the episode, then the grade."""

    def __init__(self, *answers: dict) -> None:
        self.answers = list(answers)
        self.sent: list[dict] = []

    async def post(self, server_name=None, url_path=None, json=None, cookies=None):
        self.sent.append({"server_name": server_name, "url_path": url_path})
        return _Answer(self.answers.pop(0))


@pytest.fixture
def agent() -> GraderAgent:
    return GraderAgent.model_construct(config=None, server_client=None)


@patch(
    "responses_api_agents.x.app.responses_in_process",
    _self_call_through_server_client,
)
async def test_run_grades_the_episode(agent: GraderAgent) -> None:
    client = _Client({}, {"output": []}, {"reward": 1.0})
    agent.server_client = client
    agent.server_client.post = client.post

    verified = await agent.run(None, None)

    assert verified.reward == 1.0
    assert client.sent[1]["server_name"] == agent.config.name
