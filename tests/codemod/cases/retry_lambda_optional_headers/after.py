"""The newer form: a self-call made by the agent's retry wrapper, optional headers in a conditional `**`."""

from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


class ResumableAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        checkpoint = request.headers.get("x-ng-checkpoint")
        headers = {"x-ng-checkpoint": checkpoint} if checkpoint else None
        response = await self.retry_checkpoint_refusal(
            lambda: responses_in_process(
                self,
                url_path=self.url_path_for_run("/v1/responses", body),
                json=body.responses_create_params,
                cookies=request.cookies,
                **({"headers": headers} if headers is not None else {}),
            ),
            request=request,
        )
        await raise_for_status(response)
        return await get_response_json(response)
