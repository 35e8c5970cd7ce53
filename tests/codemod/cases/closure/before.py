import asyncio

from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import get_response_json, raise_for_status


class VotingAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        async def one_sample(index: int) -> dict:
            params = body.responses_create_params.model_copy(update={"metadata": {"sample": str(index)}})
            response = await self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=params,
                cookies=request.cookies,
            )
            await raise_for_status(response)
            return await get_response_json(response)

        samples = await asyncio.gather(*(one_sample(i) for i in range(self.config.num_samples)))
        return {"samples": samples}
