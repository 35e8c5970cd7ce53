from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class PatientAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest, slow: bool) -> dict:
        first = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
            **({"timeout": 600} if slow else {}),
        )
        again = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
            **({"json": {}} if slow else {}),
        )
        headers = {"x-slow": "1"}
        last = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
            **({"headers": headers} | {}),
        )
        return await first.json() | await again.json() | await last.json()
