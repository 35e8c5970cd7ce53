"""An agent with postponed annotations: the helper's import goes after `from __future__`."""

from __future__ import annotations

import asyncio

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.server_utils import raise_for_status


class PatientAgent(SimpleResponsesAPIAgent):
    async def run(self, body: BaseRunRequest) -> dict:
        response = await asyncio.wait_for(
            self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            ),
            timeout=self.config.timeout_s,
        )
        await raise_for_status(response)
        return await response.json()
