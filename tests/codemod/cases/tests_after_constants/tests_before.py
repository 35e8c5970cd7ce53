"""Module constants below the imports: the fake of the helper goes below them, as a helper would."""

from unittest.mock import AsyncMock, MagicMock

from responses_api_agents.x.app import GraderAgent

# the servers the episode talks to
_MODEL_SERVER = "model_server"
PROMPT_PATH: str = "prompts/grader.yaml"
RETRIES = 2


# builds the agent with a fake client
def _make_agent() -> tuple[GraderAgent, MagicMock]:
    client = MagicMock()
    return GraderAgent(config=MagicMock(), server_client=client), client


async def test_run_grades_the_episode() -> None:
    agent, client = _make_agent()
    response = MagicMock(ok=True, cookies={})
    response.read = AsyncMock(return_value=b"{}")
    client.post = AsyncMock(return_value=response)

    await agent.run(MagicMock(cookies={}), MagicMock())

    assert client.post.await_count == 3
