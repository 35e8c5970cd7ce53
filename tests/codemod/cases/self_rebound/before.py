"""The method rebinds `self` later: the helper must receive the agent, not whatever `self` names then."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest, delegate: SimpleResponsesAPIAgent | None = None) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        if delegate is not None:
            self = delegate
        return await get_response_json(response)
