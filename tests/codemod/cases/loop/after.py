from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


class RefiningAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        cookies = request.cookies
        params = body.responses_create_params
        episode: dict = {}
        for turn in range(self.config.max_turns):
            response = await responses_in_process(
                self,
                url_path=self.url_path_for_run("/v1/responses", body),
                json=params,
                cookies=cookies,
            )
            await raise_for_status(response)
            cookies = response.cookies
            episode = await get_response_json(response)
            if episode.get("status") == "completed":
                break
            params = params.model_copy(update={"input": [*params.input, *episode["output"]]})
        return episode
