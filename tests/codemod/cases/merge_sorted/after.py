from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.loopback import (
    LOOPBACK_TIMEOUT,
    InProcessResponse,
    responses_in_process,
    warm_up,
)


class WarmAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        await warm_up(self, timeout=LOOPBACK_TIMEOUT)
        response: InProcessResponse = await responses_in_process(
            self,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        return await response.json()
