from fastapi import Request
from selfcall_audit.inprocess import (
    InProcessResponse,
    responses_in_process,
)

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class TrailingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response: InProcessResponse = await responses_in_process(
            self, url_path="/v1/responses", json=body.responses_create_params
        )
        return await response.json()
