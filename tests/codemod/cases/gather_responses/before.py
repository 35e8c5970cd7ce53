"""Responses bound by unpacking `asyncio.gather(...)`: each name is read as the response in its place."""

import asyncio
from asyncio import gather

from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class PairAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        first, second = await asyncio.gather(
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
            return_exceptions=False,
        )
        first.raise_for_status()
        return {"first": await first.json(), "status": second.status}


class HalfHttpxAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        first, second = await asyncio.gather(
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
        )
        return {"first": first.json(), "second": await second.json()}


class ImportedGatherAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> int:
        [left, right] = await gather(
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
            asyncio.sleep(0),
        )
        return left.status_code
