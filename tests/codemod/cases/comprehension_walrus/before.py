"""A `:=` in a comprehension binds in the method: `target` is the last candidate tried."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        target = self.config.name
        if any((target := name) == self.config.model_server.name for name in body["candidates"]):
            body = dict(body, routed=True)
        response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
        return await get_response_json(response)
