"""The body is bound with := inside the call: the binding stays, since json= stays."""

from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        response = await responses_in_process(
            self,
            url_path="/v1/responses",
            json=(params := body.responses_create_params),
        )
        return {"params": params, "response": await get_response_json(response)}
