from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status


class IndirectAgent(SimpleResponsesAPIAgent):
    async def _post_checked(self, server_name: str, url_path: str, payload: object, cookies: dict):
        response = await self.server_client.post(server_name=server_name, url_path=url_path, json=payload, cookies=cookies)
        await raise_for_status(response)
        return response

    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self._post_checked(
            self.config.name, "/v1/responses", body.responses_create_params, request.cookies
        )
        return await response.json()
