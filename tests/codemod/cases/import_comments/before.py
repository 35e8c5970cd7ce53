"""The file already imports from the helper's module in parentheses, with comments: each comment
stays once, with the name it was written after."""

from selfcall_audit.inprocess import (  # the in-process path
    InProcessResponse,  # what the helper returns
)

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> InProcessResponse:
        await self.server_client.post(
            server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params
        )
