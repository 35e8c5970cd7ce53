"""A self-call not awaited where it stands: awaited later, its response is not followed."""

import asyncio

from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


async def with_retries(operation):
    for _ in range(3):
        response = await operation()
        if response.status_code < 500:
            return response


class TaskAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        task = asyncio.create_task(
            self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            )
        )
        return await get_response_json(await task)


class RetriedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await with_retries(
            lambda: self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            )
        )
        return await get_response_json(response)


class DeferredAgent(SimpleResponsesAPIAgent):
    def _ask(self, body: BaseRunRequest):
        return self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )

    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        return (await self._ask(body)).status_code


class AwaitedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        await raise_for_status(response)
        return await get_response_json(response)
