from fastapi import Request
from selfcall_audit.inprocess import responses_in_process as run_locally

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class RenamingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        first = await run_locally(self, url_path="/v1/responses", json=body.responses_create_params)
        second = await run_locally(
            self, url_path="/v1/responses", json=await first.json()
        )
        return await second.json()
