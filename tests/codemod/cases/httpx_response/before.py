"""An agent written when the server client answered with httpx responses: read without `await`."""

from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class HttpxEraAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> BaseVerifyResponse:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
            cookies=request.cookies,
        )
        cookies = response.cookies

        verify_request = body.model_dump() | {"response": response.json()}
        verified = await self.server_client.post(
            server_name=self.config.resources_server.name,
            url_path="/verify",
            json=verify_request,
            cookies=cookies,
        )
        return BaseVerifyResponse.model_validate(verified.json())
