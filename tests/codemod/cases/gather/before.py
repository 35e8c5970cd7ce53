import asyncio

from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class PairAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        first, second = await asyncio.gather(
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
            self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params),
        )
        return {"first": await get_response_json(first), "second": await get_response_json(second)}
