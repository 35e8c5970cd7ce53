"""The server name is bound with := inside the call and read after it: removing it would be a NameError."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=(name := self.config.name),
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        return {"server": name, "response": await get_response_json(response)}
