"""A self-call as a default value: it runs once, when the inner function is defined."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        async def first(
            response=await self.server_client.post(
                server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params
            ),
        ) -> dict:
            return await get_response_json(response)

        return await first()
