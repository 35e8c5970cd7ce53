from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


class NamedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        started = len(body.responses_create_params.input)

        me = self.config.name
        response = await self.server_client.post(server_name=me, url_path="/v1/responses", json=body.responses_create_params)
        await raise_for_status(response)
        episode = await get_response_json(response)
        return {"turns": len(episode["output"]) - started, "response": episode}
