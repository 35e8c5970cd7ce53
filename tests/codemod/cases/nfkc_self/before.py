"""`ｓelf` (a fullwidth s) is `self` to Python: from the second pass on, the call goes through a peer."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict, peer: SimpleResponsesAPIAgent) -> list:
        outputs = []
        target = self.config.name
        for _ in range(2):
            response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
            outputs.append(await get_response_json(response))
            ｓelf = peer  # noqa: F841
        return outputs
