from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class TracingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest, trace: str | None = None) -> dict:
        extra = {}
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            **{"json": body.responses_create_params, "cookies": request.cookies},
            **({"headers": {"x-trace": trace}} if trace else ({"headers": {}} if extra else {})),
        )
        return await response.json()
