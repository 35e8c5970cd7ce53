"""A nested function rebinds the method's `self` through `nonlocal`: the call then goes through a peer."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict, peer: SimpleResponsesAPIAgent) -> dict:
        target = self.config.name

        def hand_over() -> None:
            nonlocal self
            self = peer

        hand_over()
        response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
        return await get_response_json(response)
