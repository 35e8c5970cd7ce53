import json

import pytest

from responses_api_agents.x.app import GraderAgent


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


async def test_run_grades_the_episode(agent: GraderAgent) -> None:
    client = _Client({}, {"output": []}, {"reward": 1.0})
    agent.server_client = client
    agent.server_client.post = client.post

    verified = await agent.run(None, None)

    assert verified.reward == 1.0
    assert client.sent[1]["server_name"] == agent.config.name
