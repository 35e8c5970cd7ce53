from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class SplattingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        call = {"server_name": self.config.name, "url_path": "/v1/responses"}
        response = await self.server_client.post(**call, json=body.responses_create_params)
        return await response.json()
