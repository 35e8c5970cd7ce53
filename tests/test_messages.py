"""A finding's subject is data (the routes, the HTTP method, what cannot be resolved); the
reporters word it. Each kind of subject, as a user reads it: one line of the agent below per kind."""

from __future__ import annotations

from pathlib import Path

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class VerbAgent(SimpleResponsesAPIAgent):
    async def run(self, body, verb, flag):
        await self.server_client.request(self.config.name, "/v1/responses", method=verb)
        await self.server_client.post(server_name=self.config.name, url_path="/run" if flag else "/seed")
        await self.server_client.post(server_name=pick(), url_path="/v1/responses", json=body)
        await self.server_client.get(server_name=self.config.name, url_path="/v1/responses")
        await self.server_client.post(server_name=self.config.name, url_path=f"/x/{self.pick()}")
        await self.server_client.post(server_name=self.config.name, url_path="/v1/responses")
"""


def test_each_subject_of_a_finding_in_words(tmp_path: Path, cli) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "toy"\n')
    app = tmp_path / "responses_api_agents" / "verb" / "app.py"
    app.parent.mkdir(parents=True)
    app.write_text(AGENT)

    result = cli("scan", "--no-cache", "--select", "SCA", "--format", "concise", tmp_path)

    where = f"{tmp_path.name}/responses_api_agents/verb/app.py"
    lines = [line.split(f"{where}:", 1)[1] for line in result.stdout.splitlines() if where in line]
    assert lines == [
        "6:15: SCA003 VerbAgent.run may post to itself: its own /v1/responses with a method that cannot be resolved",
        "7:15: SCA002 VerbAgent.run calls its own /run or /seed route over HTTP; call the method directly",
        "8:15: SCA003 VerbAgent.run may post to itself: the server name posting to /v1/responses cannot be "
        "resolved statically",
        "9:15: SCA002 VerbAgent.run calls its own GET /v1/responses route over HTTP; call the method directly",
        "10:15: SCA002 VerbAgent.run calls its own /x/{self.pick(...)} (a path that cannot be resolved "
        "statically) route over HTTP; call the method directly",
        "11:15: SCA001 VerbAgent.run posts to its own /v1/responses over HTTP; call the handler in-process",
    ]
