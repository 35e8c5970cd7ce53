"""The module defines `ｒesponses_in_process` (a fullwidth r), which Python reads as the helper's name."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return await get_response_json(response)


async def ｒesponses_in_process(agent: object, **kwargs: object) -> dict:
    """An older function of this module that happens to have the same name."""
    return {"legacy": True}
