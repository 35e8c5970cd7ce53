"""An agent that builds its own app and records it where the in-process helper finds it: the
self-call is rewritten."""

import json

from fastapi import FastAPI, Request
from pydantic import ConfigDict

from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent
from nemo_gym.config_types import ResourcesServerRef
from nemo_gym.server_utils import get_response_json, raise_for_status


class GraderAgentConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef


class GraderAgent(SimpleResponsesAPIAgent):
    config: GraderAgentConfig
    model_config = ConfigDict(extra="allow")

    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        app.post("/v1/responses")(self.responses)
        app.post("/run")(self.run)
        self._webserver_app = app
        return app

    async def run(self, request: Request, body: BaseRunRequest) -> BaseVerifyResponse:
        cookies = request.cookies
        seeded = await self.server_client.post(
            server_name=self.config.resources_server.name,
            url_path="/seed_session",
            json=body.model_dump(),
            cookies=cookies,
        )
        await raise_for_status(seeded)
        cookies = seeded.cookies

        # One episode through our own /v1/responses handler.
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,  # the episode's parameters
            cookies=cookies,
        )
        await raise_for_status(response)
        cookies = response.cookies
        episode = await get_response_json(response)

        verified = await self.server_client.post(
            server_name=self.config.resources_server.name,
            url_path="/verify",
            json=body.model_dump() | {"response": episode},
            cookies=cookies,
        )
        await raise_for_status(verified)
        return BaseVerifyResponse.model_validate(json.loads(await verified.read()))
