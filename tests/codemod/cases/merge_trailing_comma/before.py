from fastapi import Request
from selfcall_audit.inprocess import (
    InProcessResponse,
)

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class TrailingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response: InProcessResponse = await self.server_client.post(
            server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params
        )
        return await response.json()
