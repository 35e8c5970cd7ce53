from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status


class ContinuingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        episode: dict = {}
        for activation in range(1, 3):
            response = await responses_in_process(
                self,
                url_path="/v1/responses",
                json=body.responses_create_params,
                cookies=request.cookies,
                headers={"x-ng-agent-activation": str(activation)},
            )
            await raise_for_status(response)
            episode = await response.json()
        return episode
