"""Comments on the lines of removed arguments stay on their lines; none moves onto another argument."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        first = await self.server_client.post(
            url_path="/v1/responses",  # the episode
            server_name=self.config.name,  # our own server
            json=body.responses_create_params,
        )
        second = await self.server_client.request(
            url_path="/v1/responses",  # again
            method="POST",  # the only verb it serves
            server_name=self.config.name  # still ourselves
        )
        return {"first": await get_response_json(first), "second": await get_response_json(second)}
