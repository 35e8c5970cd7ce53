from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status


class MetricsAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        await raise_for_status(response)
        episode = await response.json()
        metrics = await self.server_client.post(
            server_name=self.config.name, url_path="/aggregate_metrics", json={"responses": [episode]}
        )
        await raise_for_status(metrics)
        return episode
