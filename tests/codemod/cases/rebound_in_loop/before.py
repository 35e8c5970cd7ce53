"""The first turn asks this agent itself, the next ones the model: the server name changes in the loop."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> list:
        outputs = []
        target = self.config.name
        for _ in range(2):
            response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
            outputs.append(await get_response_json(response))
            target = self.config.model_server.name  # the next pass posts to the model
        return outputs
