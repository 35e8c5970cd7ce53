from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status

RESPONSES = "/v1/responses"


class TerseAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(self.config.name, RESPONSES, json=body.responses_create_params)
        await raise_for_status(response)
        return await response.json()
