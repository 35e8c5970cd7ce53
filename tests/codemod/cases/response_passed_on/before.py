"""A self-call's response passed on: followed into NeMo Gym's readers alone."""

from fastapi import Request

from nemo_gym import server_utils
from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


def log_response(response) -> None:
    print(response.status_code)


class ReaderAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        await raise_for_status(response)
        return await get_response_json(response)


class ModuleReaderAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        await server_utils.raise_for_status(response)
        response = await server_utils.get_response_json(response)
        return response


class LoggedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        log_response(response)
        return await response.json()


class ReturnedAgent(SimpleResponsesAPIAgent):
    async def _ask(self, body: BaseRunRequest):
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        await raise_for_status(response)
        return response

    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        return (await self._ask(body)).status_code


class StoredAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        self.last_response = response
        return await response.json()
