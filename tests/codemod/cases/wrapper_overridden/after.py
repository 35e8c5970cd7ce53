"""Self-calls made through NeMo Gym's wrappers, where a class of the project defines a wrapper
otherwise: what that one does with the response is not followed."""

from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


class TextLoggingMixin:
    async def retry_checkpoint_refusal(self, operation, **kwargs):
        response = await operation()
        self.last_text = response.text
        return response


class LoggedAgent(TextLoggingMixin, SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.retry_checkpoint_refusal(
            lambda: self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            )
        )
        return await get_response_json(response)


class WaitingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.checkpointable_external_wait(
            lambda: self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            ),
            request=request,
        )
        return await get_response_json(response)


class TimedWaitingAgent(WaitingAgent):
    async def checkpointable_external_wait(self, operation, **kwargs):
        response = await operation()
        self.elapsed = response.elapsed
        return response


class RetryingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.retry_checkpoint_refusal(
            lambda: responses_in_process(
                self,
                url_path="/v1/responses",
                json=body.responses_create_params,
            ),
            request=request,
        )
        await raise_for_status(response)
        return await get_response_json(response)
