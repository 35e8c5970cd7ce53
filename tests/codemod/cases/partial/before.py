import functools

from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class CurriedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        to_myself = functools.partial(self.server_client.post, server_name=self.config.name)
        response = await to_myself(url_path="/v1/responses", json=body.responses_create_params)
        return await response.json()
