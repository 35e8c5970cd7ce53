from fastapi import Request

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


def responses_in_process(events: list) -> list:
    """Keeps only the events this process produced (an unrelated function with the helper's name)."""
    return [event for event in events if event.get("local")]


class BusyAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        episode = await response.json()
        return {"events": responses_in_process(episode.get("events", []))}
