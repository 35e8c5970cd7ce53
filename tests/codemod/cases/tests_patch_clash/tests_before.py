from unittest.mock import AsyncMock, MagicMock

from responses_api_agents.x.app import GraderAgent
from tests.support import apply_overrides as patch


async def test_run_posts_to_itself() -> None:
    client = MagicMock()
    client.post = AsyncMock(return_value=MagicMock(ok=True, cookies={}, read=AsyncMock(return_value=b"{}")))
    agent = patch(GraderAgent(config=MagicMock(), server_client=client))

    await agent.run(MagicMock(cookies={}), MagicMock())

    client.post.assert_any_await(server_name=agent.config.name, url_path="/v1/responses", json=None, cookies={})
