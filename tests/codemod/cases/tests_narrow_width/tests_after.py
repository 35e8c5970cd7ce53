"""Checked at a narrow line length: a decorator that would not fit goes over several lines."""

from unittest.mock import AsyncMock, MagicMock, patch

from responses_api_agents.x.app import GraderAgent

ANSWER = MagicMock(ok=True, cookies={})


async def _self_call_through_server_client(agent, **kwargs):
    """The agent's self-call, sent to its server client as before the migration."""
    return await agent.server_client.post(
        server_name=agent.config.name,
        **kwargs,
    )


class TestRun:
    @patch(
        "responses_api_agents.x.app.responses_in_process",
        _self_call_through_server_client,
    )
    async def test_self_call_is_posted(self) -> None:
        client = MagicMock()
        client.post = AsyncMock(return_value=ANSWER)
        agent = GraderAgent(
            config=ANSWER, server_client=client
        )

        await agent.run(MagicMock(cookies={}), MagicMock())

        sent = client.post.await_args_list
        assert "/v1/responses" in [
            c.kwargs["url_path"] for c in sent
        ]
