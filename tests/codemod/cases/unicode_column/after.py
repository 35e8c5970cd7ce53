"""Non-ASCII text before the call on its line: positions are counted in characters, not bytes."""

from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class ÉchoAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        réponse_à_l_écho = await responses_in_process(self, url_path="/v1/responses", json=body.responses_create_params)
        return {"étiquette": "café", "réponse": await réponse_à_l_écho.json()}
