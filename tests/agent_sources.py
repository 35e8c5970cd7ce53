"""Source text shared by the tests: an agent whose `run` posts to its own /v1/responses, the call
spread over lines (line 6 to 10), so both ends of a reported range can be checked."""

SELF_CALLING_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body,
        )
        return await response.json()
"""

# A judge whose critic is a YAML reference: the instance `judge` is its own critic, so a post to
# `self.config.critic.name` is a self-call, the YAML line its evidence.
JUDGE_CONFIG = """\
judge:
  responses_api_agents:
    judge:
      entrypoint: app.py
      critic:
        type: responses_api_agents
        name: judge
"""

# Whether DuelAgent self-calls depends only on the YAML: `peer` may be the instance itself.
DUEL_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class DuelAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        reply = await self.server_client.post(
            server_name=self.config.peer.name, url_path="/v1/responses", json=body
        )
        return await reply.json()
"""
DUEL_CONFIG = """\
{name}:
  responses_api_agents:
    duel_agent:
      entrypoint: app.py
      peer:
        type: responses_api_agents
        name: {peer}
"""
# The instance `duel_solo` is its own peer: a self-call only this config, in another folder, reveals.
SOLO_CONFIG = DUEL_CONFIG.format(name="duel_solo", peer="duel_solo")
