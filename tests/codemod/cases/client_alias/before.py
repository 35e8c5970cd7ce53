from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status


class AliasAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        client = self.server_client
        seeded = await client.post(
            server_name=self.config.resources_server.name, url_path="/seed_session", json=body.model_dump()
        )
        await raise_for_status(seeded)
        response = await client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
            cookies=seeded.cookies,
        )
        await raise_for_status(response)
        return await response.json()

    async def replay(self, request: Request, body: BaseRunRequest) -> dict:
        post = self.server_client.post
        response = await post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params)
        await raise_for_status(response)
        return await response.json()
