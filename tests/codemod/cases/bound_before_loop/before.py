"""The server name is bound once, before the loop, and nothing in the loop binds it again."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> list:
        outputs = []
        target = self.config.name
        for turn in range(2):
            response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
            outputs.append(await get_response_json(response))
            body = dict(body, turn=turn)
        return outputs
