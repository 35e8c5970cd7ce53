"""`target` is a global that another function rebinds while the method waits."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


def retarget(name: str) -> None:
    global target
    target = name


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        global target
        target = self.config.name
        retarget(self.config.model_server.name)
        response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
        return await get_response_json(response)
