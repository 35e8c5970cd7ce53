"""A file that starts with a form feed (a page break, as some editors write): it stays."""

from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest):
        await responses_in_process(self, url_path="/v1/responses", json=body)
