import logging

from aiohttp import ClientResponseError
from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status

LOG = logging.getLogger(__name__)


class CarefulAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        try:
            response = await responses_in_process(
                self,
                url_path="/v1/responses",
                json=body.responses_create_params,
                cookies=request.cookies,
            )
            await raise_for_status(response)
            episode = await get_response_json(response)
        except ClientResponseError as error:
            LOG.warning("episode failed with %s", error.status)
            return {"reward": 0.0, "error": str(error)}
        return {"reward": 1.0, "response": episode}
