"""A self-call inside a decorator expression: it runs once, when the inner function is defined."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        @self.remember(
            await self.server_client.post(
                server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params
            )
        )
        def cached() -> None:
            pass

        return self.remembered
