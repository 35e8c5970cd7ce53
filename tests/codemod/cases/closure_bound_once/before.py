"""A closure reads `target`, which its method binds once, before making it."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        target = self.config.name

        async def ask() -> dict:
            response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
            return await get_response_json(response)

        body = dict(body, asked=True)
        return await ask()
