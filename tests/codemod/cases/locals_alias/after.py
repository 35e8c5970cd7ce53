"""The method hands locals() to a template: the alias may be read by its name and stays."""

from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        me = self.config.name
        response = await responses_in_process(
            self, url_path="/v1/responses", json=body.responses_create_params
        )
        return {"report": "{me} answered".format(**locals()), "response": await get_response_json(response)}
