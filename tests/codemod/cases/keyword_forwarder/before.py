from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status

TRACE_HEADERS = {"x-trace": "on"}


class ForwardingAgent(SimpleResponsesAPIAgent):
    async def _post(self, *, server_name: str, url_path: str, json: object, cookies: dict | None = None):
        return await self.server_client.post(server_name=server_name, url_path=url_path, json=json, cookies=cookies)

    async def _send(self, *, target: str, route: str, payload: object, headers: dict | None = None):
        """Posts under the names this agent's callers use."""
        return await self.server_client.post(server_name=target, url_path=route, json=payload, headers=headers)

    async def _traced(self, *, server_name: str, url_path: str, json: object, headers: dict = TRACE_HEADERS):
        return await self.server_client.post(server_name=server_name, url_path=url_path, json=json, headers=headers)

    async def _checked(self, *, server_name: str, url_path: str, json: object):
        response = await self.server_client.post(server_name=server_name, url_path=url_path, json=json)
        await raise_for_status(response)
        return response

    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        seeded = await self._post(
            server_name=self.config.resources_server.name, url_path="/seed_session", json=body.model_dump()
        )
        await raise_for_status(seeded)
        response = await self._post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
            cookies=seeded.cookies,
        )
        await raise_for_status(response)
        draft = await self._send(target=self.config.name, route="/v1/responses", payload=body.responses_create_params)
        traced = await self._traced(server_name=self.config.name, url_path="/v1/responses", json={"input": "again"})
        checked = await self._checked(server_name=self.config.name, url_path="/v1/responses", json={"input": "last"})
        extra = await self._post(
            server_name=self.config.name, url_path="/v1/responses", json={}, **({"cookies": seeded.cookies} if seeded else {})
        )
        renamed = await self._send(target=self.config.name, route="/v1/responses", **{"payload": {}})
        return [
            await get_response_json(response),
            await get_response_json(draft),
            await get_response_json(traced),
            await get_response_json(checked),
            await get_response_json(extra),
            await get_response_json(renamed),
        ]
