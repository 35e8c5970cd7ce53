"""A closure reads `target`, which its method binds once, before making it."""

from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:

        async def ask() -> dict:
            response = await responses_in_process(self, url_path="/v1/responses", json=body)
            return await get_response_json(response)

        body = dict(body, asked=True)
        return await ask()
