"""A fake of the self-dispatch: the client's post answers each route, the test checks the order."""

from unittest.mock import AsyncMock, MagicMock

import pytest

from responses_api_agents.x.app import GraderAgent


def _make_agent() -> tuple[GraderAgent, MagicMock]:
    client = MagicMock()
    return GraderAgent(config=MagicMock(), server_client=client), client


def _answer(payload: dict | None = None) -> MagicMock:
    response = MagicMock(ok=True, cookies={})
    response.read = AsyncMock(return_value=b"{}" if payload is None else repr(payload).encode())
    return response


class TestGrader:
    @pytest.mark.parametrize("prefixed", [False, True])
    async def test_run_dispatches_to_its_own_route(self, prefixed: bool) -> None:
        agent, client = _make_agent()

        async def post(*, url_path, **kwargs):
            if url_path.endswith("/v1/responses"):  # the agent's own handler
                return _answer({"output": []})
            return _answer()

        client.post = AsyncMock(side_effect=post)

        await agent.run(MagicMock(cookies={}), MagicMock())

        paths = [call.kwargs["url_path"] for call in client.post.await_args_list]
        assert paths == ["/seed_session", "/v1/responses", "/verify"]

    def test_answer_is_ok(self) -> None:
        assert _answer().ok
