from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


class RolloutAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> BaseVerifyResponse:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path=self.url_path_for_run("/v1/responses", body),
            json=body.responses_create_params,
            cookies=request.cookies,
        )
        await raise_for_status(response)
        episode = await get_response_json(response)
        return BaseVerifyResponse.model_validate(body.model_dump() | {"response": episode, "reward": 0.0})
