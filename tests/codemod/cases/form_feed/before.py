"""A file that starts with a form feed (a page break, as some editors write): it stays."""

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest):
        await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
