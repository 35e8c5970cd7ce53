"""The server name is bound once, before the loop, and nothing in the loop binds it again."""

from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class RelayAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> list:
        outputs = []
        for turn in range(2):
            response = await responses_in_process(self, url_path="/v1/responses", json=body)
            outputs.append(await get_response_json(response))
            body = dict(body, turn=turn)
        return outputs
