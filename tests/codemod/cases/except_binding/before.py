"""`except ... as target` unbinds `target` when the handler ends: the call then raises NameError."""

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        target = self.config.name
        try:
            body = dict(body, attempts=int(body["attempts"]))
        except (KeyError, ValueError) as target:  # noqa: F841
            pass
        response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)
        return await get_response_json(response)
