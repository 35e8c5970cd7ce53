"""Also run as a script: the repo's modules import once the script has put the repo on `sys.path`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from selfcall_audit.inprocess import responses_in_process  # noqa: E402

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent  # noqa: E402
from nemo_gym.server_utils import raise_for_status  # noqa: E402


class ScriptAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        response = await responses_in_process(self, url_path="/v1/responses", json=body)
        await raise_for_status(response)
        return await response.json()


if __name__ == "__main__":
    print(ScriptAgent.__name__)
