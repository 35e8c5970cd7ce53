"""A lambda whose parameter is named `self`: at the call, `self` is the lambda's argument."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest, peers: list) -> list:
        ask = lambda self: self.server_client.post(  # noqa: E731
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        return [await get_response_json(await ask(peer)) for peer in peers]
